package dataset

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
)

// Loaded is one dataset as read on the machine where a run was launched,
// carried to the machine that runs it (a detached run's datasets.json), so
// that the files, and any credentials that reach them, stay where they are.
type Loaded struct {
	// Origin is where the cases came from: the dataset file's absolute
	// path on the launching machine.
	Origin string `json:"origin"`
	Cases  []Case `json:"cases"`
}

// LoadedKind and LoadedVersion mark a datasets.json file.
const (
	LoadedKind    = "mst.datasets"
	LoadedVersion = 1
)

type loadedFile struct {
	Kind     string   `json:"kind"`
	Version  int      `json:"version"`
	Datasets []Loaded `json:"datasets"`
}

// WriteLoaded writes ds to path, as a datasets.json file.
func WriteLoaded(path string, ds []Loaded) error {
	data, err := json.Marshal(loadedFile{Kind: LoadedKind, Version: LoadedVersion, Datasets: ds})
	if err != nil {
		return err
	}
	return atomicfile.WriteFrom(path, bytes.NewReader(data), 0o600)
}

// ReadLoaded reads a datasets.json file.
func ReadLoaded(path string) ([]Loaded, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("loaded datasets: %w", err)
	}
	var f loadedFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("loaded datasets %s: %v", path, err)
	}
	if f.Kind != LoadedKind || f.Version != LoadedVersion {
		return nil, fmt.Errorf("loaded datasets %s: not an %s file of version %d (kind %q, version %d)", path, LoadedKind, LoadedVersion, f.Kind, f.Version)
	}
	for _, d := range f.Datasets {
		for _, c := range d.Cases {
			if c.ID == "" || c.Input == "" {
				return nil, fmt.Errorf("loaded datasets %s: a case of %s has no id or no input", path, d.Origin)
			}
		}
	}
	if f.Datasets == nil {
		f.Datasets = []Loaded{}
	}
	return f.Datasets, nil
}
