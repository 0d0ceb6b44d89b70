package main

import (
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mst-eval/mst/internal/ground/atomicfile"
)

// runFiles measures what storing a transcript costs the file system of
// dir, apart from everything else a trial does: n files of 4 KiB written
// as a run folder stores transcripts (atomicfile.Create: a temporary file,
// synced, linked into place, the folder synced), and n empty files
// created and removed, one folder each. It prints the CPU time of this
// process per file, in user space and in the kernel. On a file system
// whose file creation is costly, that cost is in every trial's figure of
// the other modes and of BenchmarkTrials.
func runFiles(parent string, n int) error {
	dir, err := os.MkdirTemp(parent, "mst-bench-files-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	machine()
	fmt.Printf("%d files in %s\n", n, dir)
	fmt.Printf("%-28s %14s %14s %14s\n", "", "CPU/file", "user/file", "kernel/file")
	data := make([]byte, 4096)
	for i := range data {
		data[i] = 'x'
	}
	steps := []struct {
		name string
		do   func(sub string, i int) error
	}{
		{"stored as a transcript", func(sub string, i int) error {
			return atomicfile.Create(filepath.Join(sub, fmt.Sprintf("case-%06d#1.json", i)), data)
		}},
		{"created empty", func(sub string, i int) error {
			f, err := os.Create(filepath.Join(sub, fmt.Sprintf("f%06d", i)))
			if err != nil {
				return err
			}
			return f.Close()
		}},
		{"removed", func(sub string, i int) error {
			return os.Remove(filepath.Join(sub, fmt.Sprintf("f%06d", i)))
		}},
	}
	for _, st := range steps {
		sub := filepath.Join(dir, "empty")
		if st.name == "stored as a transcript" {
			sub = filepath.Join(dir, "transcripts")
		}
		if err := os.MkdirAll(sub, 0o755); err != nil {
			return err
		}
		u0, s0 := processCPU()
		for i := range n {
			if err := st.do(sub, i); err != nil {
				return err
			}
		}
		u1, s1 := processCPU()
		per := func(d time.Duration) string { return perTrial(d, n) }
		fmt.Printf("%-28s %14s %14s %14s\n", st.name, per(u1-u0+s1-s0), per(u1-u0), per(s1-s0))
	}
	return nil
}

// processCPU is this process's CPU time so far, in user space and in the
// kernel.
func processCPU() (user, sys time.Duration) {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano()), time.Duration(ru.Stime.Nano())
}
