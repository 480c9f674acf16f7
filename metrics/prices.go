package metrics

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/cctrace/cctrace/instrument/wire"
)

// pricesJSON is the built-in price table. Its "version" and "source" fields say when and where
// the rates were read; update both with the rates.
//
//go:embed prices.json
var pricesJSON []byte

// Prices is a versioned table of per-model token prices, read with ParsePrices or LoadPrices, or
// the built-in table from DefaultPrices. A Prices is immutable and safe for concurrent use.
// The zero value holds no models: every lookup fails.
type Prices struct {
	// Version identifies the table, conventionally the date its rates were read (2026-11-29).
	Version string
	// Source says where the rates come from.
	Source string

	models []ModelPrice
	exact  map[string]*ModelPrice // every listed id, as listed
	family map[string]*ModelPrice // Family(id) of every listed id

	// providers holds the cloud providers' own tables, by wire.Provider; a provider without
	// one is billed at the table above (the Anthropic API's).
	providers map[wire.Provider]*providerPrices
	// geo multiplies the cost of the families it names by where inference ran
	// (usage.inference_geo), and serverTools prices the API's own tools per request.
	geo         map[string]*geoPremium
	serverTools ServerToolPrices
}

// geoPremium is the cost of one inference geography over the global default.
type geoPremium struct {
	multiplier float64
	families   map[string]bool
}

// GeoPremium is the JSON form of one inference geography's premium: a multiplier on the rates
// of the models it names (family or exact ids).
type GeoPremium struct {
	Multiplier float64  `json:"multiplier"`
	IDs        []string `json:"ids"`
}

// ServerToolPrices are USD per request of the API's own tools (usage.server_tool_use). A tool
// with no price costs nothing beyond the tokens it adds.
type ServerToolPrices struct {
	WebSearch     float64 `json:"web_search"`
	WebFetch      float64 `json:"web_fetch"`
	CodeExecution float64 `json:"code_execution"`
}

// providerPrices is how one cloud provider's prices differ from the Anthropic API's.
type providerPrices struct {
	rates            *Prices // the provider's own rates, by model (nil: none listed)
	regionalPremium  float64 // multiplier on regional endpoints, 0 for none
	regionalFamilies map[string]bool
}

// ProviderPrice is the JSON form of one provider's prices: models whose rates differ from the
// Anthropic API's, and the premium its regional endpoints cost over its global ones.
type ProviderPrice struct {
	Source string   `json:"source,omitempty"`
	Notes  []string `json:"notes,omitempty"`
	// Models lists the provider's own rates, in the format of the top-level models; a model it
	// does not list is billed at the Anthropic API's rates.
	Models []ModelPrice `json:"models,omitempty"`
	// RegionalPremium multiplies the rates of the models it names on a regional endpoint.
	RegionalPremium *RegionalPremium `json:"regional_premium,omitempty"`
}

// RegionalPremium is the surcharge of a provider's regional (or geographic) endpoints over its
// global ones, for the models it names (family or exact ids).
type RegionalPremium struct {
	Multiplier float64  `json:"multiplier"`
	IDs        []string `json:"ids"`
}

// ModelPrice is the price of one model: the ids it answers to and its rates. The zero value
// prices everything at zero.
type ModelPrice struct {
	// Name is a human name, e.g. "Claude Sonnet 4.5".
	Name string `json:"name"`
	// Source says where the rates were read.
	Source string `json:"source,omitempty"`
	// IDs are the model ids priced here. Family forms ("claude-sonnet-4-5") also match dated,
	// provider-prefixed and [1m] ids; a full id ("claude-sonnet-4-5-20250929") matches only itself
	// and wins over the family.
	IDs []string `json:"ids"`
	Rates
	// LongContext, when set, replaces Rates for requests with more input than its threshold.
	LongContext *LongContext `json:"long_context,omitempty"`
	// Fast multiplies the rates of an answer in fast mode (usage.speed "fast"); 0 when the
	// model has none, and such an answer is unpriced.
	Fast float64 `json:"fast,omitempty"`
}

// Rates are USD per million tokens. The zero value is free.
type Rates struct {
	Input        float64 `json:"input"`          // uncached input tokens
	Output       float64 `json:"output"`         // output tokens
	CacheRead    float64 `json:"cache_read"`     // cache hits and refreshes
	CacheWrite5m float64 `json:"cache_write_5m"` // cache writes with the default 5-minute TTL
	CacheWrite1h float64 `json:"cache_write_1h"` // cache writes with the 1-hour TTL
}

// LongContext is a price tier for long prompts: when a request's total input (uncached, cache
// reads and cache writes) is above AboveInputTokens, every token of it is priced at these rates.
type LongContext struct {
	AboveInputTokens int `json:"above_input_tokens"`
	Rates
}

// priceFile is the JSON form of a price table.
type priceFile struct {
	Version      string                   `json:"version"`
	Source       string                   `json:"source"`
	Notes        []string                 `json:"notes"`
	Models       []ModelPrice             `json:"models"`
	InferenceGeo map[string]GeoPremium    `json:"inference_geo"`
	ServerTools  ServerToolPrices         `json:"server_tools"`
	Providers    map[string]ProviderPrice `json:"providers"`
}

var defaultPrices = sync.OnceValue(func() *Prices {
	p, err := ParsePrices(pricesJSON)
	if err != nil {
		// The embedded table is checked by TestDefaultPrices; reaching this is a build defect.
		panic(fmt.Sprintf("metrics: embedded prices.json: %v", err))
	}
	return p
})

// DefaultPrices returns the built-in price table (metrics/prices.json, embedded at build time).
func DefaultPrices() *Prices { return defaultPrices() }

// LoadPrices reads a price table from a JSON file, for the --pricing FILE flag. The format is that
// of the built-in metrics/prices.json:
//
//	{
//	  "version": "2026-11-29",                 // required: when the rates were read
//	  "source": "https://…",                   // optional: where they come from
//	  "notes": ["…"],                          // optional, ignored
//	  "models": [                              // required, at least one
//	    {
//	      "name": "Claude Sonnet 4.5",         // optional
//	      "ids": ["claude-sonnet-4-5"],        // required: family ids or exact ids
//	      "input": 3, "output": 15,            // USD per million tokens, all >= 0
//	      "cache_read": 0.3, "cache_write_5m": 3.75, "cache_write_1h": 6,
//	      "long_context": {                    // optional tier for long prompts
//	        "above_input_tokens": 200000,
//	        "input": 6, "output": 22.5, "cache_read": 0.6,
//	        "cache_write_5m": 7.5, "cache_write_1h": 12
//	      },
//	      "fast": 2,                           // optional: fast mode's multiplier
//	      "source": "https://…"                // optional: where the rates were read
//	    }
//	  ],
//	  "inference_geo": {                       // optional: where inference ran, if it costs more
//	    "us": {"multiplier": 1.1, "ids": ["claude-opus-4-6"]}
//	  },
//	  "server_tools": {                        // optional: USD per request of the API's own tools
//	    "web_search": 0.01, "web_fetch": 0, "code_execution": 0
//	  },
//	  "providers": {                           // optional: clouds that bill otherwise
//	    "vertex": {                            // anthropic, vertex, bedrock or foundry
//	      "source": "https://…",               // optional
//	      "models": [ … ],                     // optional: rates that differ, as above
//	      "regional_premium": {                // optional: regional endpoints cost more
//	        "multiplier": 1.1, "ids": ["claude-sonnet-4-5"]
//	      }
//	    }
//	  }
//	}
//
// (JSON has no comments: the ones above only explain the fields.) Unknown fields, negative or
// non-finite rates, models without ids and ids listed twice are errors. The file replaces the
// built-in table entirely; models it does not list are unpriced.
func LoadPrices(path string) (*Prices, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading price table: %w", err)
	}
	p, err := ParsePrices(b)
	if err != nil {
		return nil, fmt.Errorf("price table %s: %w", path, err)
	}
	return p, nil
}

// ParsePrices parses a price table in the format LoadPrices documents.
func ParsePrices(b []byte) (*Prices, error) {
	var f priceFile
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("parsing: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("parsing: trailing data after the table")
	}
	if strings.TrimSpace(f.Version) == "" {
		return nil, errors.New(`missing "version"`)
	}
	if len(f.Models) == 0 {
		return nil, errors.New(`no "models"`)
	}
	p, err := newPrices(f.Version, f.Source, f.Models)
	if err != nil {
		return nil, err
	}
	for geo, g := range f.InferenceGeo {
		if g.Multiplier < 1 || math.IsNaN(g.Multiplier) || math.IsInf(g.Multiplier, 0) {
			return nil, fmt.Errorf(`"inference_geo": %s: "multiplier" must be at least 1, got %v`, geo, g.Multiplier)
		}
		if p.geo == nil {
			p.geo = make(map[string]*geoPremium)
		}
		p.geo[geo] = &geoPremium{multiplier: g.Multiplier, families: families(g.IDs)}
	}
	st := f.ServerTools
	if err := nonNegative(map[string]float64{"web_search": st.WebSearch, "web_fetch": st.WebFetch, "code_execution": st.CodeExecution}); err != nil {
		return nil, fmt.Errorf(`"server_tools": %w`, err)
	}
	p.serverTools = st
	for name, pp := range f.Providers {
		provider, err := wire.ParseProvider(name)
		if err != nil {
			return nil, fmt.Errorf(`"providers": %w`, err)
		}
		if p.providers == nil {
			p.providers = make(map[wire.Provider]*providerPrices)
		}
		if p.providers[provider], err = parseProviderPrices(pp); err != nil {
			return nil, fmt.Errorf(`"providers": %s: %w`, name, err)
		}
	}
	return p, nil
}

func parseProviderPrices(pp ProviderPrice) (*providerPrices, error) {
	out := &providerPrices{}
	if len(pp.Models) > 0 {
		rates, err := newPrices("", pp.Source, pp.Models)
		if err != nil {
			return nil, err
		}
		out.rates = rates
	}
	if rp := pp.RegionalPremium; rp != nil {
		if rp.Multiplier < 1 || math.IsNaN(rp.Multiplier) || math.IsInf(rp.Multiplier, 0) {
			return nil, fmt.Errorf(`regional_premium: "multiplier" must be at least 1, got %v`, rp.Multiplier)
		}
		out.regionalPremium = rp.Multiplier
		out.regionalFamilies = families(rp.IDs)
	}
	return out, nil
}

// newPrices indexes a list of model prices.
func newPrices(version, source string, models []ModelPrice) (*Prices, error) {
	p := &Prices{
		Version: version,
		Source:  source,
		models:  models,
		exact:   make(map[string]*ModelPrice),
		family:  make(map[string]*ModelPrice),
	}
	for i := range p.models {
		m := &p.models[i]
		if err := m.validate(); err != nil {
			return nil, fmt.Errorf("model %d (%s): %w", i, m.Name, err)
		}
		for _, id := range m.IDs {
			if prev, dup := p.exact[id]; dup {
				return nil, fmt.Errorf("model %d (%s): id %q already listed for %s", i, m.Name, id, prev.Name)
			}
			p.exact[id] = m
		}
	}
	// A family form listed as such wins over the family of a fully dated id.
	for pass := range 2 {
		for i := range p.models {
			m := &p.models[i]
			for _, id := range m.IDs {
				fam := Family(id)
				if (fam == id) != (pass == 0) {
					continue
				}
				if _, taken := p.family[fam]; !taken {
					p.family[fam] = m
				}
			}
		}
	}
	return p, nil
}

func (m *ModelPrice) validate() error {
	if len(m.IDs) == 0 {
		return errors.New(`no "ids"`)
	}
	for _, id := range m.IDs {
		if strings.TrimSpace(id) == "" {
			return errors.New("empty id")
		}
	}
	if err := m.Rates.validate(); err != nil {
		return err
	}
	if m.Fast != 0 && (m.Fast < 1 || math.IsNaN(m.Fast) || math.IsInf(m.Fast, 0)) {
		return fmt.Errorf(`"fast" must be at least 1, got %v`, m.Fast)
	}
	if lc := m.LongContext; lc != nil {
		if lc.AboveInputTokens <= 0 {
			return errors.New(`long_context: "above_input_tokens" must be positive`)
		}
		if err := lc.Rates.validate(); err != nil {
			return fmt.Errorf("long_context: %w", err)
		}
	}
	return nil
}

func (r Rates) validate() error {
	return nonNegative(map[string]float64{"input": r.Input, "output": r.Output, "cache_read": r.CacheRead,
		"cache_write_5m": r.CacheWrite5m, "cache_write_1h": r.CacheWrite1h})
}

// nonNegative checks that every value is a non-negative number.
func nonNegative(values map[string]float64) error {
	for _, name := range slices.Sorted(maps.Keys(values)) {
		if v := values[name]; v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return fmt.Errorf("%q must be a non-negative number, got %v", name, v)
		}
	}
	return nil
}

// Lookup finds the price of a model id as the upstream or client reported it: by exact id first,
// then by Family(model). It reports false when the table does not know the model.
func (p *Prices) Lookup(model string) (*ModelPrice, bool) {
	if p == nil || model == "" {
		return nil, false
	}
	if m, ok := p.exact[model]; ok {
		return m, true
	}
	m, ok := p.family[Family(model)]
	return m, ok
}

// Cost returns the USD cost of one request's usage on model at the Anthropic API's rates: its
// tokens, times the fast mode and inference geography multipliers that apply, and the server
// tools it ran. It reports false when the model is unpriced, or has no fast mode rate for an
// answer in fast mode.
func (p *Prices) Cost(model string, u wire.Usage) (float64, bool) {
	m, ok := p.Lookup(model)
	if !ok {
		return 0, false
	}
	return p.cost(m, model, u)
}

// cost prices u on m, a price of model (the Anthropic API's, or a provider's).
func (p *Prices) cost(m *ModelPrice, model string, u wire.Usage) (float64, bool) {
	usd := m.Cost(u)
	if u.Speed == "fast" {
		if m.Fast == 0 {
			return 0, false
		}
		usd *= m.Fast
	}
	if g := p.geo[u.InferenceGeo]; g != nil && g.families[Family(model)] {
		usd *= g.multiplier
	}
	st := u.ServerToolUse
	usd += float64(st.WebSearch)*p.serverTools.WebSearch + float64(st.WebFetch)*p.serverTools.WebFetch +
		float64(st.CodeExecution)*p.serverTools.CodeExecution
	return usd, true
}

// ProviderCost returns Cost as provider bills it: at the provider's own rates for the models its
// table lists (the Anthropic API's for the rest), times its regional premium on a regional
// endpoint. globalEndpoint says whether requests go to the provider's global endpoint (Vertex
// AI's "global" location); Bedrock's is read from each model id instead: a "global." inference
// profile is global, any other (us., eu., … or an in-region model) regional. The Anthropic API
// and Foundry have no regional premium.
func (p *Prices) ProviderCost(provider wire.Provider, globalEndpoint bool) func(model string, u wire.Usage) (float64, bool) {
	pp := p.providers[provider]
	if pp == nil {
		return p.Cost
	}
	return func(model string, u wire.Usage) (float64, bool) {
		m, ok := pp.rates.Lookup(model)
		if !ok {
			if m, ok = p.Lookup(model); !ok {
				return 0, false
			}
		}
		usd, ok := p.cost(m, model, u)
		if !ok {
			return 0, false
		}
		if pp.regionalPremium > 0 && pp.regionalFamilies[Family(model)] && regionalEndpoint(provider, globalEndpoint, model) {
			usd *= pp.regionalPremium
		}
		return usd, true
	}
}

// regionalEndpoint reports whether a request for model went to a regional endpoint.
func regionalEndpoint(provider wire.Provider, globalEndpoint bool, model string) bool {
	if provider == wire.ProviderBedrock {
		id := strings.ToLower(model)
		if i := strings.LastIndexByte(id, '/'); i >= 0 {
			id = id[i+1:] // an inference profile ARN ends in its id
		}
		return !strings.HasPrefix(id, "global.")
	}
	return !globalEndpoint
}

// Cost returns the USD cost of one request's usage. Cache writes are priced by TTL when the
// upstream reported the split; writes it did not attribute to a TTL (all of them, when there is no
// split) are priced at the 5-minute rate, which is the API's default TTL.
func (m *ModelPrice) Cost(u wire.Usage) float64 {
	r := m.Rates
	if lc := m.LongContext; lc != nil && u.TotalInput() > lc.AboveInputTokens {
		r = lc.Rates
	}
	w5m, w1h := u.CacheCreation5m, u.CacheCreation1h
	if rest := u.CacheCreationInputTokens - w5m - w1h; rest > 0 {
		w5m += rest
	}
	micro := float64(u.InputTokens)*r.Input +
		float64(u.OutputTokens)*r.Output +
		float64(u.CacheReadInputTokens)*r.CacheRead +
		float64(w5m)*r.CacheWrite5m +
		float64(w1h)*r.CacheWrite1h
	return micro / 1e6
}

// families returns the set of Family(id) of ids.
func families(ids []string) map[string]bool {
	out := make(map[string]bool, len(ids))
	for _, id := range ids {
		out[Family(id)] = true
	}
	return out
}

var (
	bedrockVersion = regexp.MustCompile(`-v\d+(:\d+)?$`)
	dateSuffix     = regexp.MustCompile(`-\d{8}$`)
	dottedVersion  = regexp.MustCompile(`(\d)\.(\d)`)
)

// Family reduces a model id to the form the price table lists: lower case, without a provider
// prefix ("anthropic/", "us.anthropic.", an ARN up to its last "/"), a context suffix ("[1m]"),
// a Vertex "@date", a Bedrock "-v1:0", "-latest" or a date suffix ("-20250929"), and with
// dotted versions spelled with dashes ("claude-opus-4.5" → "claude-opus-4-5").
func Family(model string) string {
	s := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(s, '/'); i >= 0 {
		s = s[i+1:]
	}
	if i := strings.LastIndex(s, "anthropic."); i >= 0 {
		s = s[i+len("anthropic."):]
	}
	if i := strings.IndexByte(s, '['); i >= 0 && strings.HasSuffix(s, "]") {
		s = s[:i]
	}
	if i := strings.IndexByte(s, '@'); i >= 0 {
		s = s[:i]
	}
	s = bedrockVersion.ReplaceAllString(s, "")
	s = strings.TrimSuffix(s, "-latest")
	s = dateSuffix.ReplaceAllString(s, "")
	return dottedVersion.ReplaceAllString(s, "$1-$2")
}
