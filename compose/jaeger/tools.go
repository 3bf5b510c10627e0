//go:build tools

// Package jaeger pins Jaeger, the tracing backend `make observe` and the
// tracing system test run, in a module of its own: its dependencies stay
// out of hookline's go.mod. install.sh builds it.
package jaeger

import _ "github.com/jaegertracing/jaeger/cmd/jaeger"
