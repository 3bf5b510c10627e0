package compose

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/hookline/hookline/pkg/providers"
)

type composeFile struct {
	Services map[string]struct {
		Image string `yaml:"image"`
		Build struct {
			Context    string            `yaml:"context"`
			Dockerfile string            `yaml:"dockerfile"`
			Args       map[string]string `yaml:"args"`
		} `yaml:"build"`
		Environment map[string]string `yaml:"environment"`
		Ports       []string          `yaml:"ports"`
		Volumes     []string          `yaml:"volumes"`
	} `yaml:"services"`
}

// readSources concatenates the non-test Go files below dirs.
func readSources(t *testing.T, dirs ...string) string {
	t.Helper()
	var b strings.Builder
	for _, d := range dirs {
		err := filepath.WalkDir(filepath.Join("..", d), func(p string, e os.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
				return err
			}
			src, err := os.ReadFile(p)
			b.Write(src)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return b.String()
}

var defaultRef = regexp.MustCompile(`^\$\{[A-Z_]+:-(.*)\}$`)

func TestDockerComposeMatchesCode(t *testing.T) {
	raw, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	pom, err := os.ReadFile("kafka/pom.xml")
	if err != nil {
		t.Fatal(err)
	}
	kafka, ok := cf.Services["kafka"]
	if !ok {
		t.Fatal("no kafka service")
	}
	tag := kafka.Image[strings.LastIndex(kafka.Image, ":")+1:]
	if !strings.HasPrefix(kafka.Image, "apache/kafka:") || !strings.Contains(string(pom), "<kafka.version>"+tag+"</kafka.version>") {
		t.Errorf("kafka image %s does not match kafka.version in compose/kafka/pom.xml", kafka.Image)
	}

	// The port each service listens on by default, as the code says.
	wantAddr := map[string]struct{ env, def string }{
		"ingest":    {"HOOKLINE_INGEST_ADDR", ":8080"},
		"processor": {"HOOKLINE_METRICS_ADDR", ":9101"},
		"retrier":   {"HOOKLINE_METRICS_ADDR", ":9102"},
	}
	shared := readSources(t, "pkg/kafkaconf", "pkg/topics", "pkg/retry", "pkg/obs")
	for _, svc := range []string{"ingest", "processor", "retrier"} {
		t.Run(svc, func(t *testing.T) {
			s, ok := cf.Services[svc]
			if !ok {
				t.Fatalf("no %s service", svc)
			}
			if s.Build.Args["SERVICE"] != svc || s.Build.Dockerfile != "compose/Dockerfile" {
				t.Errorf("build %+v, want compose/Dockerfile with SERVICE=%s", s.Build, svc)
			}
			if _, err := os.Stat(filepath.Join("..", svc, "main.go")); err != nil {
				t.Fatalf("service %s has no main.go: %v", svc, err)
			}
			code := readSources(t, svc) + shared
			for k := range s.Environment {
				if strings.HasSuffix(k, "_SECRET") {
					continue // named by the providers file, checked below
				}
				if !strings.Contains(code, `"`+k+`"`) {
					t.Errorf("compose sets %s for %s, but the code never reads it", k, svc)
				}
			}
			w := wantAddr[svc]
			addr := s.Environment[w.env]
			if addr != w.def || !strings.Contains(code, `"`+w.def+`"`) {
				t.Errorf("%s=%q in compose; the code's default is %q (and the code must say so)", w.env, addr, w.def)
			}
			if svc == "ingest" {
				port := strings.TrimPrefix(addr, ":")
				if len(s.Ports) != 1 || !strings.HasSuffix(s.Ports[0], ":"+port) {
					t.Errorf("ingest publishes %v, want the container port %s", s.Ports, port)
				}
			}
			if svc == "retrier" {
				if _, ok := s.Environment["HOOKLINE_PROVIDERS"]; ok {
					t.Error("the retrier reads no providers file")
				}
				return
			}
			mounted := ""
			for _, v := range s.Volumes {
				if parts := strings.Split(v, ":"); len(parts) >= 2 && parts[1] == s.Environment["HOOKLINE_PROVIDERS"] {
					mounted = parts[0]
				}
			}
			if mounted == "" {
				t.Fatalf("HOOKLINE_PROVIDERS=%s is not a mounted file", s.Environment["HOOKLINE_PROVIDERS"])
			}
			env := func(k string) (string, bool) {
				v, ok := s.Environment[k]
				if m := defaultRef.FindStringSubmatch(v); m != nil {
					v = m[1]
				}
				return v, ok
			}
			if svc == "ingest" {
				if _, err := providers.Load(mounted, env); err != nil {
					t.Errorf("ingest cannot load its providers file with its environment: %v", err)
				}
			} else if _, err := providers.LoadWithoutSecrets(mounted); err != nil {
				t.Errorf("%s cannot load its providers file: %v", svc, err)
			}
		})
	}
}
