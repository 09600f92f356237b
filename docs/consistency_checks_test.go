package docs

import (
	"slices"
	"strings"
	"testing"
	"testing/fstest"
)

// The checks of TestDocuments, each on a small repository with a mistake seeded: each reports
// it at its file and line, and nothing in the good examples.
func TestDocumentChecks(t *testing.T) {
	repo := fstest.MapFS{
		".gitignore":             {Data: []byte("/bin/\n*.out\n")},
		"go.mod":                 {Data: []byte("module example\n")},
		"web/.gitignore":         {Data: []byte("/test-artifacts/\n")},
		"cmd/tool/main.go":       {Data: []byte("package main\n")},
		"streams/migrations/x":   {Data: []byte("")},
		"deploy/README.md":       {Data: []byte("# Deploying\n\n## Checks and `make` targets\n\nSee [the index](../README.md#usage).\n")},
		"docs/other.md":          {Data: []byte("# Other\n\n## Usage — the basics\n\n## Usage — the basics\n")},
		"README.md":              {Data: []byte("# Example\n\n## Usage\n")},
		"docs/a/b.md":            {Data: []byte("x\n")},
		"docs/image.png":         {Data: []byte("")},
		"docs/with space.md":     {Data: []byte("# Spaced\n")},
		"deploy/kubernetes/a.ya": {Data: []byte("")},
	}
	const long = "This line is long because it goes on and on, with a link to [the reference](https://example.com/a/very/long/url/that/does/not/count/against/the/line)."
	for _, tc := range []struct {
		name string
		doc  string
		want []string // file:line: and a part of the message; none for a good example
	}{
		{"links resolve", "# T\n\nSee [other](other.md), [its usage](other.md#usage--the-basics-1),\n" +
			"[the top](../README.md#usage), [deploy checks](../deploy/README.md#checks-and-make-targets),\n" +
			"[a space](with%20space.md#spaced), ![image](image.png), [root](/go.mod), [here](#t), [web](https://x.y/z#q).\n\n" +
			"[ref]: a/b.md\n", nil},
		{"a link to a missing file", "# T\n\nSee [gone](gone.md) and\n[also gone](../cmd/none/).\n",
			[]string{"t.md:3: link gone.md: docs/gone.md does not exist", "t.md:4: link ../cmd/none/: cmd/none does not exist"}},
		{"a link to a missing anchor", "# T\n\n## Part two\n\nSee [x](other.md#usage-the-basics), [y](#part-2), [z](#part-two).\n",
			[]string{"t.md:5: link other.md#usage-the-basics: docs/other.md has no heading #usage-the-basics", "t.md:5: link #part-2: docs/t.md has no heading #part-2"}},
		{"a reference definition to a missing file", "# T\n\nSee [x][r].\n\n[r]: ./nowhere.md\n",
			[]string{"t.md:5: link ./nowhere.md: docs/nowhere.md does not exist"}},
		{"links in code are not checked", "# T\n\n`[x](gone.md)`\n\n```\n[y](gone.md)\n```\n", nil},

		{"paths exist", "# T\n\n`cmd/tool/main.go`, `cmd/tool/`, `./cmd/...`, `go.mod`, `main.go`, `cmd/tool/main.go:12`,\n" +
			"`bin/ballet-gateway`, `web/test-artifacts/board.png`, `streams/migrations/NNNN_name.sql`, `deploy/kubernetes/*.yaml`,\n" +
			"`text/plain`, `/api/v1/items`, `go test ./cmd/tool/`, `ballet.v1.json`.\n", nil},
		{"a missing path", "# T\n\nThe tool is in `cmd/tool/mian.go`, built by `Makefile`;\nsee `deploy/helm/*.yaml` and\n`cmd/gone/...`.\n",
			[]string{"t.md:3: `cmd/tool/mian.go`: no such file", "t.md:3: `Makefile`: no file of the repository has that name",
				"t.md:4: `deploy/helm/*.yaml`: deploy/helm does not exist", "t.md:5: `cmd/gone/...`: no such file"}},
		{"a path in a table", "# T\n\n| file | what |\n|---|---|\n| `cmd/tool/gone.go` | nothing |\n",
			[]string{"t.md:5: `cmd/tool/gone.go`: no such file"}},
		{"a span across lines", "# T\n\nA span `cmd/tool/main.go` then one `cmd/tool/\nmain.go` across a line and `cmd/nope`.\n",
			[]string{"t.md:4: `cmd/nope`"}},

		{"no sentence repeats", "# T\n\nThe gateway keeps every event in the log for as long as it runs.\n\n" +
			"The gateway keeps every event in the log for as long as it can.\n\n```\nrepeated line of code with more than ten words in it here\nrepeated line of code with more than ten words in it here\n```\n\n" +
			"| a table row with more than ten words in it, which is allowed here |\n| a table row with more than ten words in it, which is allowed here |\n", nil},
		{"a repeated sentence", "# T\n\nFirst. The gateway keeps every event in the log for as long\nas it runs. Then more.\n\n" +
			"- The gateway keeps every event in the [log](other.md) for as long as it runs\n",
			[]string{`t.md:6: repeats the sentence of line 3: "the gateway keeps every event in the log for as long as it runs"`}},

		{"no splices", "# T\n\nA paragraph\nwrapped.\n\n- a list item\n  that goes on\n\n  and a second paragraph of the item.\n\n" +
			"`ballet-gateway` starts with code.\n\n" + long + "\n", nil},
		{"a paragraph that starts lower-case", "# T\n\nA paragraph.\n\nand its tail, cut off.\n\n## H\nlower again.\n",
			[]string{`t.md:5: paragraph starts with a lower-case word: "and its tail, cut off."`, `t.md:8: paragraph starts with a lower-case word`}},
		{"a long line", "# T\n\nWords " + strings.Repeat("word ", 24) + "\n\n```\n" + strings.Repeat("code ", 40) + "\n```\n",
			[]string{"t.md:3: line of 126 characters (at most 120)"}},

		{"pointers outside", "# T\n\nSee `../../shared/design/ARCHITECTURE.md` and realtime-api.rst,\nas issue #12 said; the issue is open.\n" +
			"```\ncat ../../spec.txt\n```\n[up](../../x.md)\n",
			[]string{"t.md:3: points at ARCHITECTURE.md", "t.md:3: points at realtime-api.rst", "t.md:3: ../../shared/design/ARCHITECTURE.md points outside the repository",
				`t.md:4: points at an issue ("issue #12")`, `t.md:4: points at an issue ("the issue")`,
				"t.md:6: ../../spec.txt points outside", "t.md:8: ../../x.md points outside"}},
		{"a pointer to nothing", "# T\n\nAs `../shared/spec.md` says.\n", []string{"t.md:3: ../shared/spec.md: shared/spec.md is not in the repository"}},
		{"pointers inside", "# T\n\nSee [deploy](../deploy/README.md), `../go.mod`; the issues are elsewhere.\n", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{"docs/t.md": {Data: []byte(tc.doc)}}
			for k, v := range repo {
				fsys[k] = v
			}
			got := checkRepository(fsys, []string{"docs/t.md"})
			for _, w := range tc.want {
				if !slices.ContainsFunc(got, func(g string) bool { return strings.HasPrefix(g, "docs/") && strings.Contains(g, w) }) {
					t.Errorf("no problem %q among:\n%s", w, strings.Join(got, "\n"))
				}
			}
			if len(got) != len(tc.want) {
				t.Errorf("%d problems, want %d:\n%s", len(got), len(tc.want), strings.Join(got, "\n"))
			}
		})
	}
	// The repository's own documents of the example have nothing to report.
	if got := checkRepository(repo, []string{"README.md", "deploy/README.md", "docs/other.md"}); len(got) > 0 {
		t.Errorf("the good documents: %s", strings.Join(got, "\n"))
	}
}

func TestAnchors(t *testing.T) {
	d := parseDocument("x.md", "# Operating `ballet-gateway`\n\n## Alert: BalletGatewayDown\n\n"+
		"## Several replicas — and [links](x.md)\n\n```\n# not a heading\n```\n\n## snake_case & C++ 2.0?\n\n## Alert: BalletGatewayDown\n")
	want := []string{"operating-ballet-gateway", "alert-balletgatewaydown", "several-replicas--and-links",
		"snake_case--c-20", "alert-balletgatewaydown-1"}
	got := d.anchors()
	for _, w := range want {
		if !got[w] {
			t.Errorf("no anchor %q in %v", w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("anchors %v, want %v", got, want)
	}
}
