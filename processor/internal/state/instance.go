package state

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// instanceFile holds the processor's instance id inside its state dir.
// Resetting the store keeps it (only Badger's own files are removed).
const instanceFile = "instance-id"

// InstanceID returns the instance id kept in dir, creating it on first use
// as "<hostname>-<8 random hex digits>": stable across restarts of the
// processor that owns dir, and different for every state dir, so two
// processors on one host with their own dirs never share a transactional
// id (Kafka Streams keeps its process id the same way). Cost: one small
// file read; one write on first use.
func InstanceID(dir string) (string, error) {
	path := filepath.Join(dir, instanceFile)
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		id := strings.TrimSpace(string(b))
		if id == "" || strings.ContainsAny(id, " /\\") {
			return "", fmt.Errorf("state: %s holds %q, not an instance id: delete the file to get a new one", path, id)
		}
		return id, nil
	case !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("state: read instance id: %w", err)
	}
	host, err := os.Hostname()
	if err != nil || host == "" || strings.ContainsAny(host, " /\\") {
		host = "processor"
	}
	var r [4]byte
	if _, err := rand.Read(r[:]); err != nil {
		return "", fmt.Errorf("state: instance id: %w", err)
	}
	id := host + "-" + hex.EncodeToString(r[:])
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("state: instance id: %w", err)
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(id+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("state: write instance id: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return "", fmt.Errorf("state: write instance id: %w", err)
	}
	return id, nil
}
