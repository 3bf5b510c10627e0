package control

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/headers"
)

// routeName is what a route may be called (the providers file's rule): no
// '.', '/' or ':', so that a lane topic, a control key and a breaker key
// each split back into provider and route.
var routeName = regexp.MustCompile(`^[a-z0-9_-]{1,40}$`)

// CheckRoute refuses a name no route may have.
func CheckRoute(name string) error {
	if !routeName.MatchString(name) {
		return fmt.Errorf("route %q: want a route name, 1 to 40 of a-z, 0-9, '_' and '-'", name)
	}
	return nil
}

// checkProvider refuses a name no setting or report may carry: one that
// would not split back out of a key. (The providers file is stricter; a
// setting written by an older dlq may name any provider without these.)
func checkProvider(name string) error {
	if name == "" || strings.ContainsAny(name, " /:") {
		return fmt.Errorf("provider %q: want a provider name", name)
	}
	return nil
}

// ParseRoute reads PROVIDER/ROUTE, as `dlq route` takes it.
func ParseRoute(s string) (provider, route string, err error) {
	provider, route, ok := strings.Cut(s, "/")
	if !ok {
		return "", "", fmt.Errorf("%q: want PROVIDER/ROUTE, such as stripe/billing (a provider-wide setting is dlq provider)", s)
	}
	if err := checkProvider(provider); err != nil {
		return "", "", fmt.Errorf("%q: %w", s, err)
	}
	if err := CheckRoute(route); err != nil {
		return "", "", fmt.Errorf("%q: %w", s, err)
	}
	return provider, route, nil
}

// RouteOr is route, or headers.DefaultRoute when it is empty (a record,
// outcome or report written before routes, or one of the route default).
func RouteOr(route string) string {
	if route == "" {
		return headers.DefaultRoute
	}
	return route
}

// RecordRoute is the route a retry-tier, DLQ or lane record is for: its
// hookline.route header, headers.DefaultRoute when it has none.
func RecordRoute(r *kgo.Record) string { return RouteOr(headers.Value(r, headers.Route)) }
