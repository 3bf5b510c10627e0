// Package compose holds no Go code of its own: it is the folder of the
// no-Docker Kafka launcher (kafka.sh), the docker-compose stack and their
// configuration. Its test checks that docker-compose.yml names the services,
// ports and environment variables the code really has.
package compose
