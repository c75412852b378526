// Package hooks carries functions of the root package to internal/preview,
// which gives the library's own operator tools (billingctl) the engine's
// dry-run decisions without making them part of the root's API. Package
// billing sets each in an init function; they are typed any because this
// package cannot import the root (the root imports it).
package hooks

// The root's dry-run functions; see internal/preview for their types.
var (
	PlanPeriod     any // func(*billing.Collector, billing.RunKind, *billing.Period, time.Time) (action, reason string)
	RunQueries     any // func(*billing.Collector, billing.RunKind, time.Time) ([]billing.StatusQuery, error)
	CheckChange    any // func(*billing.Collector, context.Context, op string, months int, date time.Time, tier string, amount billing.Amount, recs []billing.Period, p *billing.Period) error
	CanReactivate  any // func(*billing.Collector, string, []billing.Period, time.Time) error
	CheckSubscribe any // func(*billing.Collector, context.Context, billing.SubscribeRequest, []billing.Period) (billing.Subscribed, error)
)
