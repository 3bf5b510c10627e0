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
		Image   string   `yaml:"image"`
		Command []string `yaml:"command"`
		Build   struct {
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
	cf := loadCompose(t)
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
			} else if _, err := providers.LoadForProcessor(mounted, env); err != nil {
				t.Errorf("%s cannot load its providers file with its environment: %v", svc, err)
			}
		})
	}
}

// loadCompose parses docker-compose.yml.
func loadCompose(t *testing.T) composeFile {
	t.Helper()
	raw, err := os.ReadFile("docker-compose.yml")
	if err != nil {
		t.Fatal(err)
	}
	var cf composeFile
	if err := yaml.Unmarshal(raw, &cf); err != nil {
		t.Fatalf("docker-compose.yml: %v", err)
	}
	return cf
}

// mounts maps the container path of each of a service's bind mounts to its
// host path (relative to compose/); named volumes are left out.
func mounts(t *testing.T, svc string, volumes []string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, v := range volumes {
		parts := strings.Split(v, ":")
		if len(parts) < 2 {
			t.Errorf("%s: volume %q: want host:container[:ro]", svc, v)
			continue
		}
		if strings.HasPrefix(parts[0], ".") || strings.HasPrefix(parts[0], "/") {
			out[parts[1]] = parts[0]
		}
	}
	return out
}

// TestComposeMountsExist: every file or folder a service mounts from the
// repository exists, so `docker compose up` never mounts an empty folder in
// place of a missing file.
func TestComposeMountsExist(t *testing.T) {
	cf := loadCompose(t)
	for name, s := range cf.Services {
		for container, host := range mounts(t, name, s.Volumes) {
			if _, err := os.Stat(host); err != nil {
				t.Errorf("%s mounts %s at %s, which does not exist: %v", name, host, container, err)
			}
		}
	}
}

// TestComposeBrokerMatchesLocalBroker: compose's Kafka is set as the broker
// that compose/kafka.sh starts without Docker: every setting of
// compose/kafka/server.properties.tmpl with a fixed value (no @NAME@ of the
// script's) is in the kafka service's environment, as the image spells it
// (KAFKA_ then the name in capitals, dots as underscores), with the same
// value. So a setting the pipeline's behaviour or figures rest on (topics
// never created by a stray produce, 2 MiB records, the broker's retry of a
// transaction's first produce) cannot be in one and not the other.
func TestComposeBrokerMatchesLocalBroker(t *testing.T) {
	raw, err := os.ReadFile("kafka/server.properties.tmpl")
	if err != nil {
		t.Fatal(err)
	}
	env := loadCompose(t).Services["kafka"].Environment
	// compose's listeners add the host's; the rest are per instance (@NAME@).
	differ := map[string]bool{"listener.security.protocol.map": true}
	n := 0
	for i, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimSpace(line)
		name, value, ok := strings.Cut(line, "=")
		if line == "" || strings.HasPrefix(line, "#") || strings.Contains(value, "@") || differ[name] {
			continue
		}
		if !ok {
			t.Errorf("server.properties.tmpl line %d: %q is not name=value", i+1, line)
			continue
		}
		n++
		key := "KAFKA_" + strings.ToUpper(strings.ReplaceAll(name, ".", "_"))
		if got, ok := env[key]; !ok {
			t.Errorf("server.properties.tmpl sets %s=%s; compose's kafka does not set %s", name, value, key)
		} else if got != value {
			t.Errorf("server.properties.tmpl sets %s=%s; compose's kafka has %s=%s", name, value, key, got)
		}
	}
	if n < 8 {
		t.Errorf("read %d fixed settings from server.properties.tmpl; want at least 8 (is the file there?)", n)
	}
}

// listenPort is the port a hookline service listens on in compose, from the
// variable the code reads.
var listenPort = map[string]string{
	"ingest":    "HOOKLINE_INGEST_ADDR",
	"processor": "HOOKLINE_METRICS_ADDR",
	"retrier":   "HOOKLINE_METRICS_ADDR",
	"dlq":       "HOOKLINE_ADMIN_ADDR",
}

func portOf(t *testing.T, cf composeFile, svc string) string {
	t.Helper()
	addr := cf.Services[svc].Environment[listenPort[svc]]
	i := strings.LastIndex(addr, ":")
	if i < 0 {
		t.Fatalf("%s: %s=%q has no port", svc, listenPort[svc], addr)
	}
	return addr[i+1:]
}

// TestComposeObservability: dlq serve, Prometheus and Grafana are wired as
// their configuration files say: pinned images, ports on loopback only, the
// config and rules mounted where the flags and rule_files point, every
// hookline service scraped on the port it listens on, Grafana's data source
// at the prometheus service and its dashboards folder where the provider
// looks.
func TestComposeObservability(t *testing.T) {
	cf := loadCompose(t)

	dlq, ok := cf.Services["dlq"]
	if !ok {
		t.Fatal("no dlq service (dlq serve exports the DLQ gauges)")
	}
	if dlq.Build.Args["SERVICE"] != "dlq" || strings.Join(dlq.Command, " ") != "serve" {
		t.Errorf("dlq: build %+v command %v, want SERVICE=dlq running serve", dlq.Build, dlq.Command)
	}
	code := readSources(t, "dlq", "pkg/kafkaconf", "pkg/topics", "pkg/obs")
	for k := range dlq.Environment {
		if !strings.Contains(code, `"`+k+`"`) {
			t.Errorf("compose sets %s for dlq, but the code never reads it", k)
		}
	}
	if tok := defaultRef.ReplaceAllString(dlq.Environment["HOOKLINE_ADMIN_TOKEN"], "$1"); len(tok) < 16 {
		t.Errorf("dlq listens beyond loopback in its container and needs a token of 16+ characters; its default is %q", tok)
	}
	if p := portOf(t, cf, "dlq"); len(dlq.Ports) != 1 || dlq.Ports[0] != "127.0.0.1:"+p+":"+p {
		t.Errorf("dlq publishes %v, want 127.0.0.1:%s:%s", dlq.Ports, p, p)
	}

	for _, name := range []string{"prometheus", "alertmanager", "grafana"} {
		s, ok := cf.Services[name]
		if !ok {
			t.Fatalf("no %s service", name)
		}
		img, tag, _ := strings.Cut(s.Image, ":")
		if want := map[string]string{"prometheus": "prom/prometheus", "alertmanager": "prom/alertmanager", "grafana": "grafana/grafana"}[name]; img != want ||
			!regexp.MustCompile(`^v?\d+\.\d+\.\d+$`).MatchString(tag) {
			t.Errorf("%s image %q: want %s at a pinned version", name, s.Image, want)
		}
		if len(s.Ports) == 0 {
			t.Errorf("%s publishes no port", name)
		}
		for _, p := range s.Ports {
			if !strings.HasPrefix(p, "127.0.0.1:") {
				t.Errorf("%s publishes %q: bind it to 127.0.0.1", name, p)
			}
		}
	}

	// Prometheus: its config where --config.file says, the rules beside it.
	prom := cf.Services["prometheus"]
	pm := mounts(t, "prometheus", prom.Volumes)
	configPath := ""
	for _, a := range prom.Command {
		if v, ok := strings.CutPrefix(a, "--config.file="); ok {
			configPath = v
		}
	}
	if pm[configPath] != "./prometheus/prometheus.yml" {
		t.Fatalf("prometheus --config.file=%s is mounted from %q, want ./prometheus/prometheus.yml", configPath, pm[configPath])
	}
	var pc struct {
		RuleFiles []string `yaml:"rule_files"`
		Alerting  struct {
			Alertmanagers []struct {
				StaticConfigs []struct {
					Targets []string `yaml:"targets"`
				} `yaml:"static_configs"`
			} `yaml:"alertmanagers"`
		} `yaml:"alerting"`
		ScrapeConfigs []struct {
			JobName       string `yaml:"job_name"`
			StaticConfigs []struct {
				Targets []string `yaml:"targets"`
			} `yaml:"static_configs"`
		} `yaml:"scrape_configs"`
	}
	raw, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &pc); err != nil {
		t.Fatalf("prometheus.yml: %v", err)
	}
	if len(pc.RuleFiles) == 0 {
		t.Error("prometheus.yml loads no rules")
	}
	for _, rf := range pc.RuleFiles {
		in := filepath.Join(filepath.Dir(configPath), rf)
		if filepath.IsAbs(rf) {
			in = rf
		}
		host, ok := pm[in]
		if !ok {
			t.Errorf("rule file %s (%s in the container) is not mounted", rf, in)
			continue
		}
		if filepath.Clean(host) != filepath.Join("prometheus", rf) {
			t.Errorf("rule file %s is mounted from %s, not compose/prometheus/%s (the file promtool checks)", rf, host, rf)
		}
	}
	checkComposeAlertmanager(t, cf, pc.Alerting.Alertmanagers)
	scraped := map[string]string{} // service -> job
	for _, sc := range pc.ScrapeConfigs {
		for _, st := range sc.StaticConfigs {
			for _, target := range st.Targets {
				host, port, _ := strings.Cut(target, ":")
				if host == "localhost" {
					continue
				}
				if _, ok := listenPort[host]; !ok {
					t.Errorf("job %s scrapes %s: no hookline service of that name", sc.JobName, target)
					continue
				}
				if want := portOf(t, cf, host); port != want {
					t.Errorf("job %s scrapes %s, but %s listens on %s", sc.JobName, target, host, want)
				}
				if !strings.HasPrefix(sc.JobName, "hookline-") {
					t.Errorf("job %s: the alert HooklineTargetDown watches jobs named hookline-*", sc.JobName)
				}
				scraped[host] = sc.JobName
			}
		}
	}
	for svc := range listenPort {
		if _, ok := scraped[svc]; !ok {
			t.Errorf("prometheus.yml does not scrape %s", svc)
		}
	}

	// Grafana: provisioning where Grafana reads it, the data source at the
	// prometheus service, the dashboards folder where the provider looks.
	gm := mounts(t, "grafana", cf.Services["grafana"].Volumes)
	for _, dir := range []string{"datasources", "dashboards"} {
		if gm["/etc/grafana/provisioning/"+dir] != "./grafana/provisioning/"+dir {
			t.Errorf("grafana: /etc/grafana/provisioning/%s is mounted from %q", dir, gm["/etc/grafana/provisioning/"+dir])
		}
	}
	ds := grafanaDatasource(t)
	if ds.URL != "http://prometheus:"+promPort(t, prom.Ports) {
		t.Errorf("grafana data source url %s, want http://prometheus:<its port>", ds.URL)
	}
	var dp struct {
		Providers []struct {
			Options struct {
				Path string `yaml:"path"`
			} `yaml:"options"`
		} `yaml:"providers"`
	}
	raw, err = os.ReadFile("grafana/provisioning/dashboards/hookline.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(raw, &dp); err != nil || len(dp.Providers) != 1 {
		t.Fatalf("dashboards provisioning: %v, %d providers", err, len(dp.Providers))
	}
	if p := dp.Providers[0].Options.Path; gm[p] != "./grafana/dashboards" {
		t.Errorf("the dashboard provider reads %s, which is mounted from %q, not ./grafana/dashboards", p, gm[p])
	}
	home := cf.Services["grafana"].Environment["GF_DASHBOARDS_DEFAULT_HOME_DASHBOARD_PATH"]
	if rel, ok := strings.CutPrefix(home, dp.Providers[0].Options.Path+"/"); !ok {
		t.Errorf("home dashboard %s is outside the provisioned folder", home)
	} else if _, err := os.Stat(filepath.Join("grafana", "dashboards", rel)); err != nil {
		t.Errorf("home dashboard: %v", err)
	}
}

// checkComposeAlertmanager: the alertmanager service writes its
// configuration with the script make observe uses, mounted where its command
// runs it, from every HOOKLINE_ALERT_* variable the script reads (and no
// other), each passed through from the caller's environment; Prometheus
// sends to it on the port it listens on.
func checkComposeAlertmanager(t *testing.T, cf composeFile, ams []struct {
	StaticConfigs []struct {
		Targets []string `yaml:"targets"`
	} `yaml:"static_configs"`
}) {
	t.Helper()
	am := cf.Services["alertmanager"]
	const script = "./prometheus/alertmanager-config.sh"
	in := ""
	for container, host := range mounts(t, "alertmanager", am.Volumes) {
		if host == script {
			in = container
		}
	}
	cmd := strings.Join(am.Command, " ")
	if in == "" || !strings.Contains(cmd, "/bin/sh "+in+" /tmp/alertmanager.yml &&") {
		t.Errorf("alertmanager: command %q does not run %s (mounted at %q) into /tmp/alertmanager.yml", cmd, script, in)
	}
	listen := regexp.MustCompile(`--web\.listen-address=:(\d+)`).FindStringSubmatch(cmd)
	if listen == nil || !strings.Contains(cmd, "--config.file=/tmp/alertmanager.yml") || !strings.Contains(cmd, "--cluster.listen-address= ") && !strings.HasSuffix(cmd, "--cluster.listen-address=") {
		t.Fatalf("alertmanager: command %q: want --config.file=/tmp/alertmanager.yml, --web.listen-address=:<port> and no cluster port", cmd)
	}
	if len(am.Ports) != 1 || !strings.HasSuffix(am.Ports[0], ":"+listen[1]) {
		t.Errorf("alertmanager publishes %v, want its port %s", am.Ports, listen[1])
	}
	src, err := os.ReadFile(script)
	if err != nil {
		t.Fatal(err)
	}
	reads := map[string]bool{}
	for _, v := range regexp.MustCompile(`HOOKLINE_ALERT_[A-Z_]*[A-Z]`).FindAllString(string(src), -1) {
		reads[v] = true
	}
	for v := range reads {
		if !regexp.MustCompile(`^\$\{` + v + `:-[^}]*\}$`).MatchString(am.Environment[v]) {
			t.Errorf("alertmanager: %s=%q, want it passed through (${%s:-})", v, am.Environment[v], v)
		}
	}
	for k := range am.Environment {
		if !reads[k] {
			t.Errorf("alertmanager: compose sets %s, which %s never reads", k, script)
		}
	}
	if len(ams) != 1 || len(ams[0].StaticConfigs) != 1 || len(ams[0].StaticConfigs[0].Targets) != 1 ||
		ams[0].StaticConfigs[0].Targets[0] != "alertmanager:"+listen[1] {
		t.Errorf("prometheus.yml alerting: %+v, want one target alertmanager:%s", ams, listen[1])
	}
}

// promPort is the container port Prometheus publishes.
func promPort(t *testing.T, ports []string) string {
	t.Helper()
	if len(ports) != 1 {
		t.Fatalf("prometheus publishes %v, want one port", ports)
	}
	return ports[0][strings.LastIndex(ports[0], ":")+1:]
}

type datasource struct {
	Name string `yaml:"name"`
	UID  string `yaml:"uid"`
	Type string `yaml:"type"`
	URL  string `yaml:"url"`
}

// grafanaDatasource is the one data source Grafana is provisioned with.
func grafanaDatasource(t *testing.T) datasource {
	t.Helper()
	raw, err := os.ReadFile("grafana/provisioning/datasources/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Datasources []datasource `yaml:"datasources"`
	}
	if err := yaml.Unmarshal(raw, &f); err != nil || len(f.Datasources) != 1 {
		t.Fatalf("datasources provisioning: %v, %d data sources", err, len(f.Datasources))
	}
	if d := f.Datasources[0]; d.Type != "prometheus" || d.UID == "" {
		t.Fatalf("data source %+v: want type prometheus with a uid", d)
	}
	return f.Datasources[0]
}
