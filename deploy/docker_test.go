package deploy

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// instruction is one Dockerfile instruction, continuation lines joined.
type instruction struct {
	cmd  string // upper case
	args string
	line int
}

// parseDockerfile splits a Dockerfile into instructions, dropping comments
// and parser directives.
func parseDockerfile(t *testing.T, text string) []instruction {
	t.Helper()
	var out []instruction
	var cur strings.Builder
	start := 0
	for i, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		if cur.Len() == 0 && (trimmed == "" || strings.HasPrefix(trimmed, "#")) {
			continue
		}
		if cur.Len() > 0 && strings.HasPrefix(trimmed, "#") {
			continue // a comment inside a continued instruction
		}
		if cur.Len() == 0 {
			start = i + 1
		}
		if s, ok := strings.CutSuffix(trimmed, `\`); ok {
			cur.WriteString(s + " ")
			continue
		}
		cur.WriteString(trimmed)
		cmd, args, _ := strings.Cut(cur.String(), " ")
		out = append(out, instruction{cmd: strings.ToUpper(cmd), args: strings.TrimSpace(args), line: start})
		cur.Reset()
	}
	if cur.Len() > 0 {
		t.Fatal("Dockerfile ends inside a continued line")
	}
	return out
}

// stages splits instructions at each FROM.
func stages(ins []instruction) [][]instruction {
	var out [][]instruction
	for _, in := range ins {
		if in.cmd == "FROM" {
			out = append(out, nil)
		}
		if len(out) > 0 {
			out[len(out)-1] = append(out[len(out)-1], in)
		}
	}
	return out
}

func execForm(t *testing.T, in instruction) []string {
	t.Helper()
	var argv []string
	if err := json.Unmarshal([]byte(in.args), &argv); err != nil {
		t.Errorf("line %d: %s is not in exec (JSON array) form: %s", in.line, in.cmd, in.args)
	}
	return argv
}

func TestDockerfile(t *testing.T) {
	text := readFile(t, "Dockerfile")
	if !strings.HasPrefix(text, "# syntax=docker/dockerfile:1") {
		t.Error("the Dockerfile does not start with the dockerfile:1 syntax directive (needed for RUN --mount)")
	}
	ins := parseDockerfile(t, text)
	st := stages(ins)
	if len(st) < 2 {
		t.Fatalf("%d stages, want a build stage and a runtime stage", len(st))
	}
	for _, in := range ins {
		if in.cmd == "ADD" && regexp.MustCompile(`(?i)(https?|git)://|git@`).MatchString(in.args) {
			t.Errorf("line %d: ADD of a remote source: %s", in.line, in.args)
		}
	}

	// Build stage: Go, cached modules and build cache, a static stripped binary.
	build := st[0]
	if !regexp.MustCompile(`golang:\S+ AS build$`).MatchString(build[0].args) {
		t.Errorf("first stage %q, want a golang image named build", build[0].args)
	}
	var goBuild string
	for _, in := range build {
		if in.cmd == "RUN" && strings.Contains(in.args, "go build") {
			goBuild = in.args
		}
	}
	for _, want := range []string{
		"--mount=type=cache,target=/go/pkg/mod", "--mount=type=cache,target=/root/.cache/go-build",
		"CGO_ENABLED=0", "-trimpath", `-ldflags "-s -w -X main.version=${VERSION}"`, "./cmd/ballet-gateway",
	} {
		if !strings.Contains(goBuild, want) {
			t.Errorf("the go build step lacks %s: %q", want, goBuild)
		}
	}
	// The Go version the image builds with is the one go.mod names.
	gomod := readFile(t, filepath.Join(root, "go.mod"))
	goVer := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(gomod)
	argVer := regexp.MustCompile(`(?m)^ARG GO_VERSION=(\S+)$`).FindStringSubmatch(text)
	if goVer == nil || argVer == nil || argVer[1] != goVer[1] {
		t.Errorf("ARG GO_VERSION %v does not match go.mod's go %v", argVer, goVer)
	}

	// Runtime stage: tiny, non-root, only the binary from the build stage.
	final := st[len(st)-1]
	base := strings.Fields(final[0].args)
	if img := base[len(base)-1]; img != "gcr.io/distroless/static-debian12:nonroot" && img != "scratch" {
		t.Errorf("runtime image %q, want distroless static nonroot or scratch", img)
	}
	var user, healthcheck string
	var entrypoint, cmd []string
	var exposed []string
	binary := ""
	for _, in := range final {
		switch in.cmd {
		case "USER":
			user = in.args
		case "COPY":
			if !strings.HasPrefix(in.args, "--from=build ") {
				t.Errorf("line %d: the runtime stage copies from outside the build stage: %s", in.line, in.args)
			}
			f := strings.Fields(in.args)
			if strings.HasSuffix(f[1], "/ballet-gateway") {
				binary = f[len(f)-1]
			}
		case "RUN":
			t.Errorf("line %d: RUN in the runtime stage (it has no shell)", in.line)
		case "EXPOSE":
			exposed = append(exposed, strings.Fields(in.args)...)
		case "ENTRYPOINT":
			entrypoint = execForm(t, in)
		case "CMD":
			cmd = execForm(t, in)
		case "HEALTHCHECK":
			healthcheck = in.args
		case "ENV":
			vars := documentedVars(t)
			for _, m := range regexp.MustCompile(`(\w+)=`).FindAllStringSubmatch(in.args, -1) {
				if !vars[m[1]] {
					t.Errorf("line %d: ENV %s is not a documented variable", in.line, m[1])
				}
			}
		}
	}
	uid, _, _ := strings.Cut(user, ":")
	if uid == "" || uid == "0" || uid == "root" || strings.Trim(uid, "0123456789") != "" {
		t.Errorf("USER %q: want a numeric non-root uid (runAsNonRoot cannot check a name)", user)
	}
	for _, p := range []string{"8080", "8081"} {
		if !slices.Contains(exposed, p) {
			t.Errorf("port %s is not exposed", p)
		}
	}
	if binary == "" || len(entrypoint) == 0 || entrypoint[0] != binary {
		t.Errorf("ENTRYPOINT %v does not run the copied binary %q", entrypoint, binary)
	}
	var argv []string
	if len(entrypoint) > 0 {
		argv = append(slices.Clone(entrypoint[1:]), cmd...)
	}
	if len(argv) == 0 || argv[0] != "serve" {
		t.Errorf("the image runs %v by default, want serve", argv)
	}
	// The image has no shell or HTTP client: a HEALTHCHECK could not run.
	if healthcheck != "NONE" {
		t.Errorf("HEALTHCHECK %q, want NONE (see the Dockerfile's comment)", healthcheck)
	}
}

// dockerignore matches paths the way Docker's build context does: patterns
// relative to the context root, `**` for any number of directories, a
// pattern matching a directory excludes what is inside, `!` re-includes, and
// the last matching pattern wins.
type dockerignore []struct {
	re      *regexp.Regexp
	include bool
}

func parseDockerignore(t *testing.T, text string) dockerignore {
	t.Helper()
	var out dockerignore
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		include := false
		if s, ok := strings.CutPrefix(line, "!"); ok {
			include, line = true, strings.TrimSpace(s)
		}
		line = strings.TrimPrefix(filepath.ToSlash(filepath.Clean(line)), "/")
		var b strings.Builder
		for i := 0; i < len(line); i++ {
			switch {
			case strings.HasPrefix(line[i:], "**/"):
				b.WriteString(`(?:.*/)?`)
				i += 2
			case strings.HasPrefix(line[i:], "**"):
				b.WriteString(`.*`)
				i++
			case line[i] == '*':
				b.WriteString(`[^/]*`)
			case line[i] == '?':
				b.WriteString(`[^/]`)
			default:
				b.WriteString(regexp.QuoteMeta(line[i : i+1]))
			}
		}
		out = append(out, struct {
			re      *regexp.Regexp
			include bool
		}{regexp.MustCompile(`^` + b.String() + `$`), include})
	}
	return out
}

// excluded reports whether path (slash-separated, relative to the context)
// is left out of the build context.
func (d dockerignore) excluded(path string) bool {
	out := false
	parts := strings.Split(path, "/")
	for _, p := range d {
		for i := range parts {
			if p.re.MatchString(strings.Join(parts[:i+1], "/")) {
				out = !p.include
				break
			}
		}
	}
	return out
}

func TestDockerignoreMatcher(t *testing.T) {
	d := parseDockerignore(t, "# comment\n.git\n**/testdata\n**/*_test.go\n*.md\ndocs\n!docs/keep.md\n")
	for path, want := range map[string]bool{
		".git/HEAD": true, "streams/testdata/fuzz/x": true, "testdata/a": true, "codec/json_test.go": true,
		"README.md": true, "codec/README.md": false, "docs/operations.md": true, "docs/keep.md": false,
		"codec/json.go": false, "go.mod": false,
	} {
		if got := d.excluded(path); got != want {
			t.Errorf("excluded(%q) = %v, want %v", path, got, want)
		}
	}
}

// TestDockerignore checks that the build context keeps everything the build
// reads (go.mod, go.sum, the server's Go files and embedded files) and drops
// the repository's bulk.
func TestDockerignore(t *testing.T) {
	ig := parseDockerignore(t, readFile(t, "Dockerfile.dockerignore"))
	cmd := exec.Command("go", "list", "-deps", "-json", "./cmd/ballet-gateway")
	cmd.Dir = root
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	absRoot, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	needed := []string{"go.mod", "go.sum"}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for dec.More() {
		var pkg struct {
			Dir, ImportPath string
			Module          *struct{ Path string }
			GoFiles         []string
			CgoFiles        []string
			EmbedFiles      []string
			OtherFiles      []string
		}
		if err := dec.Decode(&pkg); err != nil {
			t.Fatal(err)
		}
		if pkg.Module == nil || pkg.Module.Path != "github.com/ballet/gateway" {
			continue
		}
		rel, err := filepath.Rel(absRoot, pkg.Dir)
		if err != nil {
			t.Fatal(err)
		}
		for _, group := range [][]string{pkg.GoFiles, pkg.CgoFiles, pkg.EmbedFiles, pkg.OtherFiles} {
			for _, f := range group {
				needed = append(needed, filepath.ToSlash(filepath.Join(rel, f)))
			}
		}
	}
	if len(needed) < 10 {
		t.Fatalf("go list found only %v", needed)
	}
	for _, f := range needed {
		if ig.excluded(f) {
			t.Errorf("the build needs %s, which Dockerfile.dockerignore leaves out", f)
		}
	}
	for _, f := range []string{".git/HEAD", ".ci/node_modules/x/package.json", "deploy/Dockerfile"} {
		if !ig.excluded(f) {
			t.Errorf("Dockerfile.dockerignore keeps %s in the build context", f)
		}
	}
}
