// Package compose holds no Go code of its own: it is the folder of the
// no-Docker Kafka launcher (kafka.sh), make run's script (run.sh) and the
// local sink it delivers to (sink/, a command), make observe's script
// (observe.sh: Prometheus and Alertmanager, receivers from the environment
// by prometheus/alertmanager-config.sh), the docker-compose stack and
// their configuration, and the Prometheus rules and Grafana dashboard. Its tests
// check that docker-compose.yml names the services, ports, environment
// variables and files the code and the repository really have, run promtool
// on the rules (check and unit tests), and check that every metric the rules
// and the dashboard use is one the Go code registers, run the receivers'
// script through amtool; TestMakeRun runs
// run.sh against KAFKA_BROKERS and follows one printed curl to the sink and
// the console.
package compose
