package web

import (
	"net/http"
	"sort"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
	"yosan/web/views"
)

// capHistoryLimit is how many cap changes the budgets page lists.
const capHistoryLimit = 20

// actionCapSet is the audit action of a cap change.
const actionCapSet = "budget.cap_set"

func (s *Server) budgetRoutes(o *echo.Group) {
	o.GET("/budgets", s.budgetsPage)
	o.POST("/budgets/:kind/:id", s.setCapSubmit)
}

// capEdit is a refused cap form: the node, what was typed, and why it was refused.
type capEdit struct {
	kind, id, typed, msg string
}

// currentPeriod returns the org's current period and its time zone.
func (s *Server) currentPeriod(org app.Org) (string, *time.Location, error) {
	loc, err := time.LoadLocation(org.TimeZone)
	if err != nil {
		return "", nil, err
	}
	return app.Period(s.cfg.DB.Now(), loc), loc, nil
}

func (s *Server) budgetsPage(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	current, _, err := s.currentPeriod(org)
	if err != nil {
		return err
	}
	period := c.QueryParam("period")
	if period == "" {
		period = current
	}
	if !db.ValidPeriod(period) {
		return app.Errorf(app.EINVALID, "choose a period such as %s (year-month)", current)
	}
	d, err := s.budgetsData(c, org, period, nil)
	if err != nil {
		return err
	}
	return render(c, http.StatusOK, views.BudgetsPage(d))
}

// budgetsData reads the budget page of org for period with a fixed number of statements,
// whatever the number of teams, members and keys: the whole tree in one (db.BudgetTree), the
// periods in one, the cap history in one. bad, when set, is a refused cap form to show on its row.
func (s *Server) budgetsData(c echo.Context, org app.Org, period string, bad *capEdit) (views.BudgetsData, error) {
	ctx := c.Request().Context()
	current, loc, err := s.currentPeriod(org)
	if err != nil {
		return views.BudgetsData{}, err
	}
	d := views.BudgetsData{Shell: s.shell(c, &org, "budgets", "Budgets / 予算"), OrgID: org.ID, Currency: org.Currency,
		Period: period, Current: period == current, Loc: loc}
	nodes, err := s.cfg.DB.BudgetTree(ctx, org.ID, period, d.Current)
	if err != nil {
		return d, err
	}
	if d.Periods, err = s.cfg.DB.BudgetPeriods(ctx, org.ID); err != nil {
		return d, err
	}
	d.Periods = withPeriods(d.Periods, current, period)
	entries, err := s.cfg.DB.ActionLog(ctx, org.ID, actionCapSet, capHistoryLimit)
	if err != nil {
		return d, err
	}
	p := cc(c).p
	canEdit := func(n db.NodeUsage) bool {
		return d.Current && p.Can(app.ActEditCap, app.Target{OrgID: org.ID, TeamID: n.TeamID, Node: n.Kind})
	}
	d.Rows = budgetRows(nodes, canEdit)
	if bad != nil {
		for i := range d.Rows {
			if d.Rows[i].Kind == bad.kind && d.Rows[i].ID == bad.id {
				d.Rows[i].Input, d.Rows[i].Error = bad.typed, bad.msg
			}
		}
	}
	d.History = capHistory(entries, nodes)
	return d, nil
}

// withPeriods adds the current and the shown period to the list, newest first, once each.
func withPeriods(ps []string, extra ...string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(ps)+len(extra))
	for _, p := range append(ps, extra...) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(out)))
	return out
}

// budgetRows orders the nodes as a tree: the org, then each team with its members (each
// followed by its keys) and then its keys bound to no member. A node whose cap exceeds its
// nearest capped ancestor's is flagged.
func budgetRows(nodes []db.NodeUsage, canEdit func(db.NodeUsage) bool) []views.BudgetRow {
	var org *db.NodeUsage
	var teams []db.NodeUsage
	members := map[string][]db.NodeUsage{}
	memberKeys := map[string][]db.NodeUsage{}
	teamKeys := map[string][]db.NodeUsage{}
	memberTeam := map[string]string{}
	for _, n := range nodes {
		if n.Kind == app.NodeMember {
			memberTeam[n.ID] = n.TeamID
		}
	}
	for i, n := range nodes {
		switch n.Kind {
		case app.NodeOrg:
			org = &nodes[i]
		case app.NodeTeam:
			teams = append(teams, n)
		case app.NodeMember:
			members[n.TeamID] = append(members[n.TeamID], n)
		case app.NodeKey:
			if n.MemberID != "" && memberTeam[n.MemberID] == n.TeamID {
				memberKeys[n.MemberID] = append(memberKeys[n.MemberID], n)
			} else {
				teamKeys[n.TeamID] = append(teamKeys[n.TeamID], n)
			}
		}
	}
	rows := make([]views.BudgetRow, 0, len(nodes))
	type ancestor struct {
		kind string
		cap  *int64
	}
	add := func(n db.NodeUsage, level int, chain []ancestor) {
		r := views.BudgetRow{Kind: string(n.Kind), ID: n.ID, Name: n.Name, Level: level, Revoked: n.Revoked,
			Cap: n.Cap, Spent: n.Spent, Reserved: n.Reserved, Thresholds: n.Thresholds, LastAlert: n.LastAlert,
			CanEdit: canEdit(n), Input: views.CapInput(n.Cap)}
		if n.Kind == app.NodeKey {
			r.Sub = n.KeyPrefix + "…"
		}
		if n.Cap != nil {
			r.Remaining = *n.Cap - n.Reserved - n.Spent
			r.Pct = usedPct(n.Spent, *n.Cap)
			for i := len(chain) - 1; i >= 0; i-- {
				if chain[i].cap != nil {
					if *n.Cap > *chain[i].cap {
						r.AboveParent = chain[i].kind
					}
					break
				}
			}
		}
		rows = append(rows, r)
	}
	var chain []ancestor
	if org != nil {
		add(*org, 0, nil)
		chain = []ancestor{{"org", org.Cap}}
	}
	for _, t := range teams {
		add(t, 1, chain)
		tc := append(chain[:len(chain):len(chain)], ancestor{"team", t.Cap})
		for _, m := range members[t.ID] {
			add(m, 2, tc)
			mc := append(tc[:len(tc):len(tc)], ancestor{"member", m.Cap})
			for _, k := range memberKeys[m.ID] {
				add(k, 3, mc)
			}
		}
		for _, k := range teamKeys[t.ID] {
			add(k, 2, tc)
		}
	}
	return rows
}

// capHistory turns cap_set audit entries into the history card, naming the nodes from the tree.
func capHistory(entries []db.AuditEntry, nodes []db.NodeUsage) []views.CapChange {
	names := make(map[string]string, len(nodes))
	for _, n := range nodes {
		names[string(n.Kind)+":"+n.ID] = nodeName(n)
	}
	out := make([]views.CapChange, 0, len(entries))
	for _, e := range entries {
		ch := views.CapChange{At: e.At, Actor: e.Actor, Kind: e.TargetKind, NodeName: names[e.TargetKind+":"+e.TargetID],
			Old: detailMoney(e.Details["old"]), New: detailMoney(e.Details["new"])}
		if ch.NodeName == "" {
			ch.NodeName = e.TargetID
		}
		out = append(out, ch)
	}
	return out
}

// detailMoney reads an amount an audit entry recorded as a decimal string (nil: no cap).
func detailMoney(v any) *int64 {
	s, ok := v.(string)
	if !ok {
		return nil
	}
	m, err := app.ParseMoney(s)
	if err != nil {
		return nil
	}
	return &m
}

// decimalOrNil is a cap as the audit log records it: a decimal string, or null for no cap.
func decimalOrNil(c *int64) any {
	if c == nil {
		return nil
	}
	return app.FormatMoney(*c)
}

// nodeName names a node in messages: "team Sales", "key ci (ysk-ab12…)".
func nodeName(n db.NodeUsage) string {
	if n.Kind == app.NodeKey {
		return keyName(n)
	}
	return n.Name
}

// setCapSubmit sets the standing cap of one node of the org (blank removes it), after checking
// the user may edit that node: owners and finance admins any node, a team admin the members and
// keys of its own team.
func (s *Server) setCapSubmit(c echo.Context) error {
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	ctx := c.Request().Context()
	kind := app.NodeKind(c.Param("kind"))
	if kind == app.NodeGlobal || !app.ValidNodeKind(kind) {
		return app.Errorf(app.ENOTFOUND, "no budget node kind %q in this org", kind)
	}
	node, err := s.cfg.DB.BudgetNode(ctx, org.ID, kind, c.Param("id"))
	if err != nil {
		return err
	}
	p := cc(c).p
	if err := p.Authorize(app.ActEditCap, app.Target{OrgID: org.ID, TeamID: node.TeamID, Node: kind}); err != nil {
		return err
	}
	typed := c.FormValue("cap")
	amount, present, err := parseYen(typed)
	if err != nil {
		current, _, perr := s.currentPeriod(org)
		if perr != nil {
			return perr
		}
		d, derr := s.budgetsData(c, org, current, &capEdit{kind: string(kind), id: node.ID, typed: typed,
			msg: "Enter an amount such as 1,000,000 (no minus sign, at most 6 decimals), or leave it empty for no cap."})
		if derr != nil {
			return derr
		}
		d.Shell.Flash, d.Shell.FlashError = "The cap of "+string(kind)+" "+nodeName(node)+" was not saved: check the amount in its row.", true
		return render(c, http.StatusBadRequest, views.BudgetsPage(d))
	}
	n := app.Node{Kind: kind, ID: node.ID}
	before, err := s.cfg.Ledger.Budget(ctx, n)
	if err != nil {
		return err
	}
	var cp *int64
	if present {
		cp = &amount
	}
	if _, err := s.cfg.Ledger.SetCap(ctx, n, cp); err != nil {
		return err
	}
	s.audit(c, p, org.ID, actionCapSet, string(kind), node.ID, map[string]any{"old": decimalOrNil(before.Cap), "new": decimalOrNil(cp)})
	msg := "Cap of " + string(kind) + " " + nodeName(node) + " removed: no cap (unlimited, still metered)"
	if cp != nil {
		msg = "Cap of " + string(kind) + " " + nodeName(node) + " set to " + views.MoneyText(org.Currency, *cp)
	}
	return flash(c, "/console/orgs/"+org.ID+"/budgets#"+views.BudgetRowID(string(kind), node.ID), msg)
}
