package metrics

import "time"

// Option configures New.
type Option func(*config)

// config holds New's settings; defaultConfig states every default.
type config struct {
	maxToolNames     int
	maxModels        int
	maxUsers         int
	maxTeams         int
	exemplarInterval time.Duration
	now              func() time.Time // the exemplar gate's clock; tests set it
	// replica and budgetEnforcement expose the metrics of those features (WithReplica,
	// WithBudgetEnforcement).
	replica, budgetEnforcement bool
	// genAILatest: the GenAI metrics of the conventions' latest experimental version.
	genAILatest bool
}

func defaultConfig() config {
	return config{
		maxToolNames:     100,
		maxModels:        50,
		maxUsers:         DefaultMaxUsers,
		maxTeams:         DefaultMaxTeams,
		exemplarInterval: DefaultExemplarInterval,
		now:              time.Now,
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

// Defaults of WithMaxUsers and WithMaxTeams.
const (
	DefaultMaxUsers = 100
	DefaultMaxTeams = 30
)

// WithMaxUsers bounds the distinct values of the user label, like WithMaxToolNames: the first n
// people seen keep their own series, later ones count as "other" (and in
// cctrace_label_overflow_total{label="user"}). Unknown identities count against it too, so a
// client inventing identity headers cannot grow the series count. The default is
// DefaultMaxUsers; n must be at least 1.
func WithMaxUsers(n int) Option { return func(c *config) { c.maxUsers = n } }

// WithMaxTeams bounds the distinct values of the team label, like WithMaxUsers. The default is
// DefaultMaxTeams; n must be at least 1.
func WithMaxTeams(n int) Option { return func(c *config) { c.maxTeams = n } }

// WithExemplarInterval sets the least time between two exemplars (the trace id of the span
// observed) of one series, or of one bucket of a histogram's series: observations in between
// are counted without one. Only the last exemplar of each is kept and scraped, so a shorter
// interval only costs CPU; zero or less gives every observation its exemplar. The default is
// DefaultExemplarInterval (1 s).
func WithExemplarInterval(d time.Duration) Option {
	return func(c *config) { c.exemplarInterval = d }
}

// WithReplica exposes cctrace_turns_handed_off_total, for a cctrace that is one of several
// replicas (the tracker's WithReplica). The default leaves it out: a cctrace on its own hands no
// turn off.
func WithReplica() Option { return func(c *config) { c.replica = true } }

// WithBudgetEnforcement exposes cctrace_budget_refusals_total, each of its scope and window
// series from the start, for a cctrace that refuses the prompts of people over budget. The
// default leaves it out: without enforcement nothing is refused.
func WithBudgetEnforcement() Option { return func(c *config) { c.budgetEnforcement = true } }

// WithGenAILatest exposes the OpenTelemetry GenAI metrics as the latest experimental version of
// the conventions names them, for OTEL_SEMCONV_STABILITY_OPT_IN=gen_ai_latest_experimental:
// gen_ai.client.inference.duration, gen_ai.client.inference.usage.{input_tokens, output_tokens,
// cache_read.input_tokens, cache_write.input_tokens} counters and
// gen_ai.client.inference.operation.{input,output}_tokens histograms, instead of
// gen_ai.client.operation.duration and gen_ai.client.token.usage. The default is the names of
// semantic conventions v1.41.0.
func WithGenAILatest() Option { return func(c *config) { c.genAILatest = true } }
