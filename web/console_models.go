package web

import (
	"net/http"

	"github.com/labstack/echo/v4"

	"yosan/web/views"
)

// The plans & models page: read-only, the config file manages both.

func (s *Server) modelRoutes(o *echo.Group) {
	o.GET("/models", s.modelsPage)
}

// modelsPage reads the plans and the models with their prices: two statements (after the org).
func (s *Server) modelsPage(c echo.Context) error {
	ctx := c.Request().Context()
	org, err := s.consoleOrg(c)
	if err != nil {
		return err
	}
	plans, err := s.cfg.DB.Plans(ctx)
	if err != nil {
		return err
	}
	models, err := s.cfg.DB.ModelCatalog(ctx)
	if err != nil {
		return err
	}
	loc, now := orgLocation(org), s.cfg.DB.Now()
	d := views.ModelsData{Shell: s.shell(c, &org, "models", "Plans & models / プランとモデル"), TimeZone: org.TimeZone,
		Plans: plans, Models: make([]views.ModelItem, 0, len(models))}
	for _, m := range models {
		item := views.ModelItem{Model: m.Model}
		// The price in force is the newest one already started; before the first one's date,
		// the first applies (app.CatalogModel.PriceAt).
		current := 0
		for i, p := range m.Prices {
			if !p.From.After(now) {
				current = i
			}
			item.Prices = append(item.Prices, views.PriceItem{From: p.From.In(loc), Price: p.Price,
				Scheduled: p.From.After(now)})
		}
		if len(item.Prices) > 0 {
			item.Prices[current].Current, item.Prices[current].Scheduled = true, false
		}
		d.Models = append(d.Models, item)
	}
	return render(c, http.StatusOK, views.ModelsPage(d))
}
