package kafkaconf

import (
	"bufio"
	"fmt"
	"os"
	"strings"
)

// ReadEnvFile reads the KEY=VALUE lines of an env file, such as the
// .kafka-secure/<user>.env files compose/kafka.sh secure-up writes (lines
// starting with # are comments). FromEnv takes the result through a lookup.
func ReadEnvFile(path string) (map[string]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			return nil, fmt.Errorf("%s: %q is not KEY=VALUE", path, line)
		}
		out[k] = v
	}
	return out, sc.Err()
}
