package web

import "github.com/labstack/echo/v4"

// consolePages registers the org pages of the console. Every handler loads its org with
// s.consoleOrg (404 for an org the user may not see) and checks the action it performs with
// cc(c).p.Authorize, the same check the JSON admin API makes.
func (s *Server) consolePages(g *echo.Group) {
	o := g.Group("/orgs/:org")
	s.overviewRoutes(o)
	s.budgetRoutes(o)
	s.teamRoutes(o)
	s.keyRoutes(o)
	s.modelRoutes(o)
	s.reservationRoutes(o)
	s.alertPageRoutes(o)
	s.invoicePageRoutes(o)
	s.providerRoutes(o)
	s.auditRoutes(o)
	s.userRoutes(o)
}
