package main

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"herd/algo"
	"herd/algo/all"
	"herd/env/remote"
)

// docFiles are the pages whose commands a user copies.
func docFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob("../../docs/guide/*.md")
	if err != nil || len(guides) == 0 {
		t.Fatalf("no guides: %v", err)
	}
	return append([]string{"../../README.md"}, guides...)
}

// docCommands returns the `go run ./cmd/herd …` argument lists in the sh
// blocks of a Markdown file, comments and line continuations resolved.
func docCommands(t *testing.T, path string) [][]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]string
	inSh, cont := false, ""
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "```sh"):
			inSh = true
			continue
		case strings.HasPrefix(line, "```"):
			inSh = false
			continue
		case !inSh:
			continue
		}
		if strings.HasSuffix(line, `\`) {
			cont += strings.TrimSuffix(line, `\`) + " "
			continue
		}
		line, cont = cont+line, ""
		words := shellWords(line)
		for i, w := range words {
			if w != "./cmd/herd" || !isGoRun(words[:i]) {
				continue
			}
			args := words[i+1:]
			for j, a := range args {
				if a == "&&" || a == "&" || a == "|" || a == ";" {
					args = args[:j]
					break
				}
			}
			out = append(out, args)
			break
		}
	}
	return out
}

// isGoRun reports whether words end in `go run` with optional flags
// (`go run -tags openblas`), i.e. the next word is the package run.
func isGoRun(words []string) bool {
	for i := len(words) - 1; i >= 1; i-- {
		if words[i] == "run" && words[i-1] == "go" {
			return true
		}
		if !strings.HasPrefix(words[i], "-") && (i == 0 || !strings.HasPrefix(words[i-1], "-")) {
			return false
		}
	}
	return false
}

// shellWords splits a command line as sh would for these pages: quotes,
// and a # comment after whitespace.
func shellWords(s string) []string {
	var words []string
	var cur strings.Builder
	inWord, quote := false, rune(0)
	for i, r := range s {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == '#' && !inWord && (i == 0 || s[i-1] == ' '):
			return words
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// Every herd command in the README and the guides parses with herd's own
// flags, names config files that exist, and, for train, resolves: a
// renamed flag, config or --set key breaks this test, not a user's first
// try. scripts/doc-commands.sh, which .ci/run runs after the tests, runs
// every command of the same pages.
func TestDocCommands(t *testing.T) {
	n := 0
	for _, path := range docFiles(t) {
		for _, args := range docCommands(t, path) {
			line := strings.Join(args, " ")
			if strings.ContainsAny(line, "[|") || strings.Contains(line, "FILE") || len(args) == 0 || strings.HasPrefix(args[0], "-") || strings.Contains(" "+line+" ", " --help ") {
				continue // a synopsis or a help page, not a run
			}
			n++
			if err := parseHerdArgs(args); err != nil {
				t.Errorf("%s: herd %s: %v", path, line, err)
				continue
			}
			var config string
			var ov algo.Overrides
			train := len(args) > 0 && args[0] == "train"
			for i := 0; i+1 < len(args); i++ {
				v := args[i+1]
				switch args[i] {
				case "--config":
					config = v
				case "--set":
					ov.Set = append(ov.Set, v)
				case "--algo":
					ov.Algo = &v
				case "--env":
					ov.Env = &v
				}
			}
			if config == "" || strings.HasPrefix(config, "/tmp/") {
				continue
			}
			if ov.Env != nil && remote.IsID(*ov.Env) {
				continue // resolving asks the env's server, which the page starts (doc-commands.sh runs it)
			}
			data, err := os.ReadFile(filepath.Join("../..", config))
			if err != nil {
				t.Errorf("%s: herd %s: %v", path, line, err)
				continue
			}
			if train {
				if _, err := algo.Resolve(data, all.Specs(), ov); err != nil {
					t.Errorf("%s: herd %s: %v", path, line, err)
				}
			}
		}
	}
	if n < 30 {
		t.Fatalf("found only %d herd commands in the docs", n)
	}
	t.Logf("%d herd commands checked", n)
}
