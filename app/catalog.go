package app

import (
	"sort"
	"time"
)

// DatedPrice is a price in force from From on.
type DatedPrice struct {
	From  time.Time
	Price Price
}

// CatalogModel is a configured model with its effective-dated prices and its upstream.
type CatalogModel struct {
	Model
	// Prices are sorted by From, oldest first; the first one applies to all earlier times.
	Prices   []DatedPrice
	Upstream Provider
	// Local is true for a model on a local backend (a provider marked local: true): the only
	// kind a privacy: sensitive route may use.
	Local bool
	// Quota holds the provider's rate windows for this model (nil: none configured).
	Quota *Quota
	// MaxTokensField is the body field that limits the answer when the gateway sets one (a
	// clamped request that named none): "max_tokens" when empty, "max_completion_tokens"
	// for OpenAI itself.
	MaxTokensField string
}

// PriceAt returns the price in force at t.
func (m *CatalogModel) PriceAt(t time.Time) Price {
	p := m.Prices[0].Price
	for _, dp := range m.Prices[1:] {
		if t.Before(dp.From) {
			break
		}
		p = dp.Price
	}
	return p
}

// Catalog is the set of models the gateway offers, built from the config at start-up.
type Catalog struct {
	models map[string]*CatalogModel
	names  []string
	routes map[string]Route
}

// NewCatalog builds a catalog. Every model needs at least one price and an upstream.
func NewCatalog(models []*CatalogModel) (*Catalog, error) {
	c := &Catalog{models: make(map[string]*CatalogModel, len(models))}
	for _, m := range models {
		if len(m.Prices) == 0 {
			return nil, Errorf(EINVALID, "model %q has no price", m.Name)
		}
		if m.Upstream == nil {
			return nil, Errorf(EINVALID, "model %q has no provider", m.Name)
		}
		if _, dup := c.models[m.Name]; dup {
			return nil, Errorf(EINVALID, "model %q is defined twice", m.Name)
		}
		sort.Slice(m.Prices, func(i, j int) bool { return m.Prices[i].From.Before(m.Prices[j].From) })
		c.models[m.Name] = m
		c.names = append(c.names, m.Name)
	}
	sort.Strings(c.names)
	return c, nil
}

// Lookup returns the model named name.
func (c *Catalog) Lookup(name string) (*CatalogModel, bool) {
	m, ok := c.models[name]
	return m, ok
}

// Models returns every model, sorted by name.
func (c *Catalog) Models() []*CatalogModel {
	out := make([]*CatalogModel, 0, len(c.names))
	for _, n := range c.names {
		out = append(out, c.models[n])
	}
	return out
}
