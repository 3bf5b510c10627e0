package cli

import (
	"strings"

	"github.com/hookline/hookline/pkg/kafkaconf"
	"github.com/hookline/hookline/pkg/topics"
)

// DefaultAdminAddr is where `dlq serve` listens unless HOOKLINE_ADMIN_ADDR
// or --addr says otherwise: loopback only.
const DefaultAdminAddr = "127.0.0.1:8081"

// config is everything dlq reads from its environment.
type config struct {
	Kafka      kafkaconf.Config
	Topics     topics.Env
	AdminAddr  string // HOOKLINE_ADMIN_ADDR
	AdminToken string // HOOKLINE_ADMIN_TOKEN
	User       string // USER: the default of --by
	LogLevel   string // HOOKLINE_LOG_LEVEL (serve)
}

func loadConfig(lookupEnv func(string) (string, bool)) (config, error) {
	get := func(k string) string { v, _ := lookupEnv(k); return strings.TrimSpace(v) }
	c := config{
		AdminAddr: get("HOOKLINE_ADMIN_ADDR"),
		User:      get("USER"),
		LogLevel:  get("HOOKLINE_LOG_LEVEL"),
	}
	c.AdminToken, _ = lookupEnv("HOOKLINE_ADMIN_TOKEN") // a token is taken as is
	if c.AdminAddr == "" {
		c.AdminAddr = DefaultAdminAddr
	}
	var err error
	if c.Kafka, err = kafkaconf.FromEnv(lookupEnv); err != nil {
		return config{}, err
	}
	if c.Topics, err = topics.EnvFrom(lookupEnv); err != nil {
		return config{}, err
	}
	return c, nil
}
