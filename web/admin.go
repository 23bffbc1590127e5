package web

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"yosan/app"
	"yosan/db"
)

// adminActor is who acts through /admin/v1: the operator's admin token, which may do
// everything app.Actor allows an operator (the console's users go through the same checks).
func adminActor() app.Actor { return app.Actor{AdminToken: true} }

// readLimited reads an admin request body of at most limit bytes.
func readLimited(r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		return nil, app.WrapError(app.EINVALID, err, "could not read the request body")
	}
	if int64(len(b)) > limit {
		return nil, app.Errorf(app.ETOOLARGE, "the request body exceeds %d bytes", limit)
	}
	return b, nil
}

// decodeJSON reads a JSON object into v, rejecting unknown fields and trailing data with a
// message that names the problem.
func decodeJSON(c echo.Context, v any) error {
	body, err := readLimited(c.Request(), 1<<20)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return app.WrapError(app.EINVALID, err, "invalid JSON body: "+jsonProblem(err))
	}
	if dec.More() {
		return app.Errorf(app.EINVALID, "invalid JSON body: unexpected data after the object")
	}
	return nil
}

func jsonProblem(err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "json: ")
	if msg == "EOF" {
		return "the body is empty"
	}
	return msg
}

type orgJSON struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	Currency  string    `json:"currency"`
	TimeZone  string    `json:"timezone"`
	USDJPY    string    `json:"usd_jpy"`
	CreatedAt time.Time `json:"created_at"`
}

func toOrgJSON(o app.Org) orgJSON {
	return orgJSON{ID: o.ID, Name: o.Name, Currency: o.Currency, TimeZone: o.TimeZone, USDJPY: app.FormatMoney(o.USDJPY), CreatedAt: o.CreatedAt}
}

// money accepts a decimal string ("1500.5") or a JSON number.
type money struct {
	set   bool
	null  bool
	value int64
}

func (m *money) UnmarshalJSON(b []byte) error {
	m.set = true
	if string(b) == "null" {
		m.null = true
		return nil
	}
	s := string(b)
	if len(b) > 0 && b[0] == '"' {
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
	}
	v, err := app.ParseMoney(s)
	if err != nil {
		return err
	}
	m.value = v
	return nil
}

func (s *Server) createOrg(c echo.Context) error {
	var in struct {
		Name     string `json:"name"`
		Currency string `json:"currency"`
		TimeZone string `json:"timezone"`
		USDJPY   money  `json:"usd_jpy"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	o := app.Org{Name: strings.TrimSpace(in.Name), Currency: strings.ToUpper(in.Currency), TimeZone: in.TimeZone, USDJPY: in.USDJPY.value}
	if o.Name == "" {
		return app.Errorf(app.EINVALID, "'name' is required")
	}
	if o.Currency == "" {
		o.Currency = s.cfg.DefaultCurrency
	}
	if !app.ValidCurrency(o.Currency) {
		return app.Errorf(app.EINVALID, "'currency' must be JPY or USD, not %q", in.Currency)
	}
	if o.TimeZone == "" {
		o.TimeZone = s.cfg.DefaultTimeZone
	}
	if _, err := time.LoadLocation(o.TimeZone); err != nil || o.TimeZone == "Local" {
		return app.Errorf(app.EINVALID, "'timezone' %q is not an IANA time zone name such as Asia/Tokyo", in.TimeZone)
	}
	if !in.USDJPY.set || in.USDJPY.null {
		o.USDJPY = s.cfg.DefaultUSDJPY
	}
	if o.USDJPY <= 0 {
		return app.Errorf(app.EINVALID, "'usd_jpy' must be a positive decimal string such as \"150\"")
	}
	o, err := s.cfg.DB.CreateOrg(c.Request().Context(), o)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, toOrgJSON(o))
}

func (s *Server) getOrg(c echo.Context) error {
	o, err := s.cfg.DB.Org(c.Request().Context(), c.Param("org"))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toOrgJSON(o))
}

func (s *Server) createTeam(c echo.Context) error {
	var in struct {
		Name string `json:"name"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if strings.TrimSpace(in.Name) == "" {
		return app.Errorf(app.EINVALID, "'name' is required")
	}
	t, err := s.cfg.DB.CreateTeam(c.Request().Context(), c.Param("org"), strings.TrimSpace(in.Name))
	if err != nil {
		return err
	}
	s.audit(c, adminActor(), t.OrgID, "team.create", "team", t.ID, map[string]any{"name": t.Name})
	return c.JSON(http.StatusCreated, map[string]any{"id": t.ID, "org_id": t.OrgID, "name": t.Name, "created_at": t.CreatedAt})
}

func (s *Server) createMember(c echo.Context) error {
	var in struct {
		Email  string `json:"email"`
		TeamID string `json:"team_id"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	email := strings.TrimSpace(in.Email)
	if at := strings.IndexByte(email, '@'); at < 1 || at == len(email)-1 || strings.ContainsAny(email, " \t\r\n") {
		return app.Errorf(app.EINVALID, "'email' must be an email address")
	}
	if in.TeamID == "" {
		return app.Errorf(app.EINVALID, "'team_id' is required")
	}
	if _, err := s.cfg.DB.Org(c.Request().Context(), c.Param("org")); err != nil {
		return err
	}
	m, err := s.cfg.DB.CreateMember(c.Request().Context(), c.Param("org"), in.TeamID, email)
	if err != nil {
		return err
	}
	s.audit(c, adminActor(), m.OrgID, "member.create", "member", m.ID, map[string]any{"email": m.Email, "team_id": m.TeamID})
	return c.JSON(http.StatusCreated, map[string]any{"id": m.ID, "org_id": m.OrgID, "team_id": m.TeamID, "email": m.Email, "created_at": m.CreatedAt})
}

type keyJSON struct {
	ID        string     `json:"id"`
	Key       string     `json:"key,omitempty"`
	OrgID     string     `json:"org_id"`
	TeamID    string     `json:"team_id"`
	MemberID  *string    `json:"member_id"`
	Name      string     `json:"name"`
	Plan      string     `json:"plan"`
	Prefix    string     `json:"prefix"`
	ExpiresAt *time.Time `json:"expires_at"`
	RevokedAt *time.Time `json:"revoked_at"`
	CreatedAt time.Time  `json:"created_at"`
	// SensitiveOnly: the key may only call privacy: sensitive routes.
	SensitiveOnly bool `json:"sensitive_only"`
}

func toKeyJSON(k app.APIKey, secret string) keyJSON {
	out := keyJSON{ID: k.ID, Key: secret, OrgID: k.OrgID, TeamID: k.TeamID, Name: k.Name, Plan: k.Plan,
		Prefix: k.Prefix, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, CreatedAt: k.CreatedAt, SensitiveOnly: k.SensitiveOnly}
	if k.MemberID != "" {
		out.MemberID = &k.MemberID
	}
	return out
}

func (s *Server) createKey(c echo.Context) error {
	var in struct {
		Name      string     `json:"name"`
		TeamID    string     `json:"team_id"`
		MemberID  string     `json:"member_id"`
		Plan      string     `json:"plan"`
		ExpiresAt *time.Time `json:"expires_at"`
		// SensitiveOnly restricts the key to privacy: sensitive routes.
		SensitiveOnly bool `json:"sensitive_only"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if in.TeamID == "" {
		return app.Errorf(app.EINVALID, "'team_id' is required")
	}
	if in.Plan == "" {
		return app.Errorf(app.EINVALID, "'plan' is required (for example free, pro or enterprise)")
	}
	if in.ExpiresAt != nil && !in.ExpiresAt.After(time.Now()) {
		return app.Errorf(app.EINVALID, "'expires_at' must be in the future")
	}
	if _, err := s.cfg.DB.Org(c.Request().Context(), c.Param("org")); err != nil {
		return err
	}
	secret := db.NewKeySecret()
	k, err := s.cfg.DB.CreateKey(c.Request().Context(), app.APIKey{OrgID: c.Param("org"), TeamID: in.TeamID,
		MemberID: in.MemberID, Name: strings.TrimSpace(in.Name), Plan: in.Plan, ExpiresAt: in.ExpiresAt,
		SensitiveOnly: in.SensitiveOnly}, secret)
	if err != nil {
		return err
	}
	s.audit(c, adminActor(), k.OrgID, "key.create", "key", k.ID, map[string]any{"name": k.Name, "prefix": k.Prefix, "team_id": k.TeamID})
	return c.JSON(http.StatusCreated, toKeyJSON(k, secret))
}

func (s *Server) revokeKey(c echo.Context) error {
	k, err := s.cfg.DB.RevokeKey(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	s.cfg.Gateway.ForgetKey(k.ID)
	s.audit(c, adminActor(), k.OrgID, "key.revoke", "key", k.ID, map[string]any{"name": k.Name, "prefix": k.Prefix})
	return c.JSON(http.StatusOK, toKeyJSON(k, ""))
}

func budgetNode(c echo.Context) app.Node {
	kind := c.Param("kind")
	if kind == "" || kind == string(app.NodeGlobal) {
		return app.Node{Kind: app.NodeGlobal, ID: app.GlobalNodeID}
	}
	return app.Node{Kind: app.NodeKind(kind), ID: c.Param("id")}
}

type budgetJSON struct {
	Kind      string  `json:"kind"`
	ID        string  `json:"id"`
	Period    string  `json:"period"`
	Currency  string  `json:"currency"`
	Cap       *string `json:"cap"`
	Reserved  string  `json:"reserved"`
	Spent     string  `json:"spent"`
	Remaining *string `json:"remaining"`
	// Thresholds are the alert thresholds in percent of the cap; LastAlert the highest one
	// already alerted this period (0 when none).
	Thresholds []int `json:"thresholds"`
	LastAlert  int   `json:"last_alert_threshold"`
}

func toBudgetJSON(b app.Budget) budgetJSON {
	out := budgetJSON{Kind: string(b.Node.Kind), ID: b.Node.ID, Period: b.Period, Currency: b.Currency,
		Reserved: app.FormatMoney(b.Reserved), Spent: app.FormatMoney(b.Spent), Thresholds: b.Thresholds, LastAlert: b.LastAlert}
	if b.Cap != nil {
		c := app.FormatMoney(*b.Cap)
		out.Cap = &c
	}
	if r, ok := b.Remaining(); ok {
		rs := app.FormatMoney(r)
		out.Remaining = &rs
	}
	return out
}

func (s *Server) getBudget(c echo.Context) error {
	b, err := s.cfg.Ledger.Budget(c.Request().Context(), budgetNode(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, toBudgetJSON(b))
}

func (s *Server) putBudget(c echo.Context) error {
	var in struct {
		Cap        money           `json:"cap"`
		Thresholds json.RawMessage `json:"thresholds"`
	}
	if err := decodeJSON(c, &in); err != nil {
		return err
	}
	if !in.Cap.set && in.Thresholds == nil {
		return app.Errorf(app.EINVALID, "give 'cap' (a decimal string such as \"1000\", or null to remove the cap) and/or 'thresholds' (percentages such as [50, 80, 90, 100], or null for the defaults)")
	}
	ctx := c.Request().Context()
	node := budgetNode(c)
	before, err := s.cfg.Ledger.Budget(ctx, node)
	if err != nil {
		return err
	}
	owner, _ := s.cfg.DB.NodeOwner(ctx, node)
	b := before
	if in.Cap.set {
		var cp *int64
		if !in.Cap.null {
			cp = &in.Cap.value
		}
		if b, err = s.cfg.Ledger.SetCap(ctx, node, cp); err != nil {
			return err
		}
		s.audit(c, adminActor(), owner.ID, "budget.cap_set", string(node.Kind), node.ID, map[string]any{"old": decimalOrNil(before.Cap), "new": decimalOrNil(cp)})
	}
	if in.Thresholds != nil {
		var ts []int
		if err := json.Unmarshal(in.Thresholds, &ts); err != nil {
			return app.Errorf(app.EINVALID, "'thresholds' must be a list of whole percentages such as [50, 80, 90, 100], or null for the defaults")
		}
		if ts != nil && len(ts) == 0 {
			return app.Errorf(app.EINVALID, "'thresholds' is empty: give at least one percentage, or null for the defaults (%v)", app.DefaultThresholds)
		}
		if b, err = s.cfg.Ledger.SetThresholds(ctx, node, ts); err != nil {
			return err
		}
		s.audit(c, adminActor(), owner.ID, "budget.thresholds_set", string(node.Kind), node.ID, map[string]any{"old": before.Thresholds, "new": b.Thresholds})
	}
	return c.JSON(http.StatusOK, toBudgetJSON(b))
}

type reservationJSON struct {
	app.Reservation
	Amount       string  `json:"amount"`
	Actual       *string `json:"actual"`
	GlobalAmount string  `json:"global_amount"`
	GlobalActual *string `json:"global_actual"`
	USDJPY       string  `json:"usd_jpy"`
}

func (s *Server) listReservations(c echo.Context) error {
	ctx := c.Request().Context()
	if _, err := s.cfg.DB.Org(ctx, c.Param("org")); err != nil {
		return err
	}
	status := app.ReservationStatus(c.QueryParam("status"))
	switch status {
	case "", app.StatusPending, app.StatusCommitted, app.StatusReleased, app.StatusExpired:
	default:
		return app.Errorf(app.EINVALID, "'status' must be pending, committed, released or expired")
	}
	limit := 100
	if q := c.QueryParam("limit"); q != "" {
		n, err := strconv.Atoi(q)
		if err != nil || n < 1 || n > 1000 {
			return app.Errorf(app.EINVALID, "'limit' must be an integer from 1 to 1000")
		}
		limit = n
	}
	rs, err := s.cfg.Ledger.Reservations(ctx, c.Param("org"), status, limit)
	if err != nil {
		return err
	}
	out := make([]reservationJSON, 0, len(rs))
	for _, r := range rs {
		j := reservationJSON{Reservation: r, Amount: app.FormatMoney(r.Amount), GlobalAmount: app.FormatMoney(r.GlobalAmount), USDJPY: app.FormatMoney(r.USDJPY)}
		if r.Actual != nil {
			a := app.FormatMoney(*r.Actual)
			j.Actual = &a
		}
		if r.GlobalActual != nil {
			a := app.FormatMoney(*r.GlobalActual)
			j.GlobalActual = &a
		}
		out = append(out, j)
	}
	return c.JSON(http.StatusOK, map[string]any{"object": "list", "data": out})
}
