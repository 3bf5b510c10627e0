// Command kafkaacl grants every hookline service its ACLs (pkg/kafkaacl) for
// one topic prefix, as the admin user of an env file such as
// .kafka-secure/admin.env. compose/kafka.sh secure-up and secure-acls run it.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/hookline/hookline/pkg/kafkaacl"
	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/providers"
)

func main() {
	envFile := flag.String("env", ".kafka-secure/admin.env", "KAFKA_* settings of a super user")
	prefix := flag.String("prefix", "", "HOOKLINE_TOPIC_PREFIX of the topics and groups")
	providersFile := flag.String("providers", "", "a providers file: the processor also gets write on its routes' topic destinations")
	flag.Parse()
	if err := run(*envFile, *prefix, *providersFile); err != nil {
		fmt.Fprintln(os.Stderr, "kafkaacl:", err)
		os.Exit(1)
	}
}

func run(envFile, prefix, providersFile string) error {
	var routeTopics []string
	if providersFile != "" {
		reg, err := providers.LoadWithoutSecrets(providersFile)
		if err != nil {
			return err
		}
		routeTopics = reg.RouteTopics()
	}
	vars, err := kafkaconf.ReadEnvFile(envFile)
	if err != nil {
		return err
	}
	cfg, err := kafkaconf.FromEnv(func(k string) (string, bool) { v, ok := vars[k]; return v, ok })
	if err != nil {
		return fmt.Errorf("%s: %w", envFile, err)
	}
	opts, err := cfg.Opts()
	if err != nil {
		return err
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		return err
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	n, err := kafkaacl.Grant(ctx, kadm.NewClient(cl), prefix, routeTopics...)
	if err != nil {
		return fmt.Errorf("%w", cfg.Explain(err))
	}
	fmt.Printf("kafkaacl: %d ACLs in place for %s (prefix %q)\n", n, strings.Join(kafkaacl.Services, ", "), prefix)
	return nil
}
