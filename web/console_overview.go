package web

import (
	"math"
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/web/views"
)

// overviewTop is how many teams, members, keys and models the overview ranks.
const overviewTop = 5

// hotPct is the share of its cap from which a node is listed as close to it.
const hotPct = 80.0

func (s *Server) overviewRoutes(o *echo.Group) {
	o.GET("", s.overviewPage)
}

// overviewPage shows the org's current period. Its data is one round trip of four statements
// (db.OrgUsage), whatever the number of teams, members and keys.
func (s *Server) overviewPage(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	loc, err := time.LoadLocation(org.TimeZone)
	if err != nil {
		return err
	}
	now := s.cfg.DB.Now().In(loc)
	start := time.Date(now.Year(), now.Month(), 1, 0, 0, 0, 0, loc)
	end := start.AddDate(0, 1, 0)
	period := app.Period(now, loc)
	u, err := s.cfg.DB.OrgUsage(c.Request().Context(), org.ID, period, org.TimeZone, start, end)
	if err != nil {
		return err
	}
	d := overviewData(u, org, now, start, end)
	d.Shell = s.shell(c, &org, "overview", "Overview / 概要")
	d.Period, d.Loc = period, loc
	d.APIBase = c.Scheme() + "://" + c.Request().Host + "/v1"
	return render(c, http.StatusOK, views.OverviewPage(d))
}

// overviewData shapes an org's usage of the period [start, end) as seen at now.
func overviewData(u db.OrgUsage, org app.Org, now, start, end time.Time) views.OverviewData {
	d := views.OverviewData{OrgID: org.ID, Currency: org.Currency, TimeZone: org.TimeZone,
		Overruns: make([]views.OverrunRow, 0, len(u.Overruns)), OverrunCount: u.OverrunCount}
	for _, n := range u.Nodes {
		if n.Kind == app.NodeOrg {
			d.Spent, d.Reserved, d.Cap = n.Spent, n.Reserved, n.Cap
			if n.Cap != nil {
				d.Remaining = *n.Cap - n.Reserved - n.Spent
				d.Pct = usedPct(n.Spent, *n.Cap)
			}
		}
	}
	for _, m := range u.Models {
		d.Requests += m.Requests
	}
	d.Empty = d.Spent == 0 && d.Reserved == 0 && len(u.Models) == 0

	// Linear projection: what was spent, scaled from the elapsed share of the month to all of it.
	total, elapsed := end.Sub(start), now.Sub(start)
	if elapsed > 0 && elapsed < total {
		d.Elapsed = 100 * float64(elapsed) / float64(total)
		d.Projected = int64(math.Min(math.Round(float64(d.Spent)*float64(total)/float64(elapsed)), math.MaxInt64/2))
	} else {
		d.Elapsed, d.Projected = 100, d.Spent
	}

	// u.Nodes is ordered by spend, largest first.
	for _, n := range u.Nodes {
		if n.Spent > 0 {
			row := views.RankRow{Name: n.Name, Spent: n.Spent, Share: sharePct(n.Spent, d.Spent)}
			switch n.Kind {
			case app.NodeTeam:
				d.TopTeams = appendTop(d.TopTeams, row)
			case app.NodeMember:
				row.Sub = n.TeamName
				d.TopMembers = appendTop(d.TopMembers, row)
			case app.NodeKey:
				row.Name = keyName(n)
				row.Sub = n.TeamName
				if n.MemberEmail != "" {
					row.Sub += " · " + n.MemberEmail
				}
				d.TopKeys = appendTop(d.TopKeys, row)
			}
		}
		if n.Cap != nil {
			if p := usedPct(n.Spent, *n.Cap); p >= hotPct {
				h := views.HotNode{Kind: string(n.Kind), Name: n.Name, Spent: n.Spent, Cap: *n.Cap, Pct: p}
				switch n.Kind {
				case app.NodeMember:
					h.Sub = n.TeamName
				case app.NodeKey:
					h.Name, h.Sub = keyName(n), n.TeamName
				}
				d.Hot = append(d.Hot, h)
			}
		}
	}
	sort.SliceStable(d.Hot, func(i, j int) bool { return d.Hot[i].Pct > d.Hot[j].Pct })
	for _, m := range u.Models {
		if m.Spent > 0 {
			d.TopModels = appendTop(d.TopModels, views.RankRow{Name: m.Model, Spent: m.Spent, Share: sharePct(m.Spent, d.Spent)})
		}
	}

	days := map[string]db.DayUsage{}
	for _, du := range u.Days {
		days[du.Day.Format("2006-01-02")] = du
	}
	today := now.Format("2006-01-02")
	for day := start; day.Before(end); day = day.AddDate(0, 0, 1) {
		key := day.Format("2006-01-02")
		du := days[key]
		d.Days = append(d.Days, views.DayBar{Day: day, Spent: du.Spent, Requests: du.Requests, Future: key > today})
		delete(days, key)
	}
	// A request stamped a moment outside its month (see db.OrgUsage) counts on its nearest day.
	for key, du := range days {
		i := 0
		if key > start.Format("2006-01-02") {
			i = len(d.Days) - 1
		}
		d.Days[i].Spent += du.Spent
		d.Days[i].Requests += du.Requests
	}

	for _, o := range u.Overruns {
		d.Overruns = append(d.Overruns, views.OverrunRow{RequestID: o.RequestID, KeyName: o.KeyName, KeyPrefix: o.KeyPrefix,
			Model: o.Model, Reserved: o.Reserved, Actual: o.Actual, At: o.At})
	}
	return d
}

func appendTop(rows []views.RankRow, r views.RankRow) []views.RankRow {
	if len(rows) >= overviewTop {
		return rows
	}
	return append(rows, r)
}

// usedPct is the share of a cap spent, in percent; a zero cap is fully used once anything is
// spent.
func usedPct(spent, cap int64) float64 {
	if cap <= 0 {
		if spent > 0 {
			return 100
		}
		return 0
	}
	return 100 * float64(spent) / float64(cap)
}

func sharePct(part, whole int64) float64 {
	if whole <= 0 {
		return 0
	}
	return 100 * float64(part) / float64(whole)
}

// keyName names a key for people: "ci (ysk-ab12…)".
func keyName(n db.NodeUsage) string {
	switch {
	case n.Name == "" && n.KeyPrefix == "":
		return "(unnamed key)"
	case n.KeyPrefix == "":
		return n.Name
	case n.Name == "":
		return n.KeyPrefix + "…"
	}
	return n.Name + " (" + n.KeyPrefix + "…)"
}
