package loadtest

import (
	"crypto/rand"
	"encoding/hex"
)

// Prefix is a topic and group prefix for one benchmark run, name and six
// random hex digits, ending in '.' as topics.DeletePrefix wants:
// "bench-e2e-3f9a1c.".
func Prefix(name string) string {
	var r [3]byte
	_, _ = rand.Read(r[:])
	return name + "-" + hex.EncodeToString(r[:]) + "."
}
