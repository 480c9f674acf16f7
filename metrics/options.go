package metrics

// Option configures New.
type Option func(*config)

// config holds New's settings; defaultConfig states every default.
type config struct {
	prices       *Prices
	maxToolNames int
	maxModels    int
}

func defaultConfig() config {
	return config{
		prices:       DefaultPrices(),
		maxToolNames: 100,
		maxModels:    50,
	}
}

// WithPrices sets the price table behind cctrace_cost_usd_total. The default (also used when p is
// nil) is DefaultPrices, the table embedded from metrics/prices.json.
func WithPrices(p *Prices) Option {
	return func(c *config) {
		if p != nil {
			c.prices = p
		}
	}
}

// WithMaxToolNames bounds the distinct values of the tool label. The first n tool names seen keep
// their own series; later ones are reported as "other". The default is 100; n must be at least 1.
func WithMaxToolNames(n int) Option {
	return func(c *config) { c.maxToolNames = n }
}

// WithMaxModels bounds the distinct values of the model label, like WithMaxToolNames. The default
// is 50; n must be at least 1.
func WithMaxModels(n int) Option {
	return func(c *config) { c.maxModels = n }
}
