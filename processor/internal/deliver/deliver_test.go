package deliver

import (
	"context"
	"errors"
	"testing"
)

func TestRouter(t *testing.T) {
	errStripe := errors.New("stripe handler")
	handlers := map[string]Handler{
		"stripe": HandlerFunc(func(context.Context, Delivery) error { return errStripe }),
		"acme":   nil,
	}
	r := NewRouter(handlers)
	handlers["github"] = HandlerFunc(func(context.Context, Delivery) error { return nil }) // after NewRouter

	tests := []struct {
		provider string
		ok       bool
	}{
		{"stripe", true},
		{"acme", false},   // nil handler: no destination
		{"github", false}, // added to the map after NewRouter
		{"unknown", false},
	}
	for _, tt := range tests {
		t.Run(tt.provider, func(t *testing.T) {
			h, ok := r.For(tt.provider)
			if ok != tt.ok || (h != nil) != tt.ok {
				t.Fatalf("For(%q) = %v, %v; want ok %v", tt.provider, h, ok, tt.ok)
			}
			if ok {
				if err := h.Handle(t.Context(), Delivery{Provider: tt.provider}); !errors.Is(err, errStripe) {
					t.Errorf("Handle = %v, want the stripe handler's error", err)
				}
			}
		})
	}

	var nilRouter *Router
	if _, ok := nilRouter.For("stripe"); ok {
		t.Error("a nil Router routed")
	}
}

func TestHandlerFunc(t *testing.T) {
	var got Delivery
	h := HandlerFunc(func(_ context.Context, d Delivery) error { got = d; return nil })
	if err := h.Handle(t.Context(), Delivery{Key: "k", Attempt: 2}); err != nil || got.Key != "k" || got.Attempt != 2 {
		t.Errorf("Handle = %v with %+v", err, got)
	}
}
