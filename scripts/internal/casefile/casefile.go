// Package casefile runs one lwbench case for the results scripts
// (scripts/clusterresults, scripts/clusterconformance) and keeps its files
// in a directory: NAME.json, lwbench's -w json result, and NAME.meta.json,
// the Meta the script records beside it.
package casefile

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"
)

// Meta is what a script records of a case beside lwbench's result.
type Meta struct {
	Case       string    `json:"case"`
	Command    string    `json:"command"`
	Commit     string    `json:"commit"`
	StartedAt  time.Time `json:"startedAt"`
	DurationMs float64   `json:"durationMs"`
	ExitCode   int       `json:"exitCode"`
	LogTail    string    `json:"logTail,omitempty"` // the last 15 lines of stderr when the run failed
}

// Run runs `lwbench args... -w json` with the ETCD_* variables left out
// of its environment (etcd reads them as flags), writes its stdout, when
// any, to dir/name.json and the Meta to dir/name.meta.json, and returns
// the Meta. A failure of the run or of a write is logged and recorded
// (ExitCode, LogTail), not returned: the other cases still run.
func Run(lwbench, dir, name, commit string, args []string) Meta {
	args = append(append([]string(nil), args...), "-w", "json")
	log.Printf("%s: lwbench %s", name, strings.Join(args, " "))
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(lwbench, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ETCD_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	start := time.Now()
	err := cmd.Run()
	meta := Meta{Case: name, Command: "lwbench " + strings.Join(args, " "), Commit: commit, StartedAt: start.UTC(),
		DurationMs: float64(time.Since(start).Milliseconds()), ExitCode: cmd.ProcessState.ExitCode()}
	if err != nil {
		lines := strings.Split(strings.TrimSpace(stderr.String()), "\n")
		meta.LogTail = strings.Join(lines[max(0, len(lines)-15):], "\n")
		log.Printf("%s: %v\n%s", name, err, meta.LogTail)
	}
	if stdout.Len() > 0 {
		if werr := os.WriteFile(filepath.Join(dir, name+".json"), stdout.Bytes(), 0o644); werr != nil {
			log.Printf("%s: %v", name, werr)
		}
	}
	b, _ := json.MarshalIndent(meta, "", "  ")
	if werr := os.WriteFile(filepath.Join(dir, name+".meta.json"), append(b, '\n'), 0o644); werr != nil {
		log.Printf("%s: %v", name, werr)
	}
	log.Printf("%s: done in %v (exit %d)", name, time.Since(start).Round(time.Second), meta.ExitCode)
	return meta
}

// Load reads a case's files in dir. meta is nil (and err nil) when the
// case never ran (no dir/name.meta.json); result is dir/name.json's bytes;
// err says why a file could not be read, or, when the case wrote no
// result, its exit code and log tail.
func Load(dir, name string) (meta *Meta, result []byte, err error) {
	b, err := os.ReadFile(filepath.Join(dir, name+".meta.json"))
	if os.IsNotExist(err) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	meta = &Meta{}
	if err := json.Unmarshal(b, meta); err != nil {
		return meta, nil, fmt.Errorf("%s.meta.json: %w", name, err)
	}
	result, err = os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		return meta, nil, fmt.Errorf("no result (exit %d): %s", meta.ExitCode, meta.LogTail)
	}
	return meta, result, nil
}
