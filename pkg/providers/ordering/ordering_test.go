package ordering

import (
	"net/http"
	"strings"
	"testing"

	"github.com/hookline/hookline/pkg/providers/rule"
)

func TestEntity(t *testing.T) {
	ptr := rule.MustJSON("/customer")
	long := strings.Repeat("c", MaxEntityLen+1)
	for _, tc := range []struct {
		name string
		r    *rule.Rule
		h    http.Header
		body string
		want string // "sha256:": a hash of the value
	}{
		{"a string", ptr, nil, `{"customer":"cus_1"}`, "cus_1"},
		{"a number", ptr, nil, `{"customer":42}`, "42"},
		{"absent", ptr, nil, `{}`, ""},
		{"an object", ptr, nil, `{"customer":{"id":1}}`, ""},
		{"not JSON", ptr, nil, `customer=cus_1`, ""},
		{"at the bound", ptr, nil, `{"customer":"` + long[1:] + `"}`, long[1:]},
		{"over the bound", ptr, nil, `{"customer":"` + long + `"}`, "sha256:"},
		{"control character", ptr, nil, `{"customer":"a\u0007b"}`, "sha256:"},
		{"a header", rule.Header("x-entity"), http.Header{"X-Entity": {"team-7"}}, `{}`, "team-7"},
		{"no rule", nil, http.Header{"X-Entity": {"team-7"}}, `{"customer":"c"}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Entity(tc.r, tc.h, []byte(tc.body))
			if tc.want == "sha256:" {
				if !strings.HasPrefix(got, "sha256:") || len(got) != len("sha256:")+64 {
					t.Fatalf("entity %q, want sha256:<hex>", got)
				}
				return
			}
			if got != tc.want {
				t.Fatalf("entity %q, want %q", got, tc.want)
			}
		})
	}
}
