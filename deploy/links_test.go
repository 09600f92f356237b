package deploy

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// operatorDocs are the operator's documents, relative to the repository root.
var operatorDocs = []string{
	"docs/operations.md", "docs/configuration.md", "docs/runbooks.md", "docs/capacity.md",
	"docs/design.md", "deploy/README.md",
}

var (
	mdLinkRE = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	fenceRE  = regexp.MustCompile("(?ms)^```.*?^```")
)

// headingAnchors are the GitHub anchors of a Markdown file's headings.
func headingAnchors(t *testing.T, path string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, m := range headingRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(readFile(t, path), ""), -1) {
		out[githubSlug(m[1])] = true
	}
	return out
}

// TestOperatorDocLinks: every relative link of the operator's documents names a file of the
// repository and, with a fragment, a heading of that file; and each document stays short
// enough to read (about 400 lines).
func TestOperatorDocLinks(t *testing.T) {
	for _, doc := range operatorDocs {
		path := filepath.Join(root, filepath.FromSlash(doc))
		text := readFile(t, path)
		if n := strings.Count(text, "\n"); n > 420 {
			t.Errorf("%s has %d lines; split it", doc, n)
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(fenceRE.ReplaceAllString(text, ""), -1) {
			target := m[1]
			if strings.Contains(target, "://") {
				continue
			}
			file, frag, _ := strings.Cut(target, "#")
			dest := path
			if file != "" {
				dest = filepath.Join(filepath.Dir(path), filepath.FromSlash(file))
			}
			if _, err := os.Stat(dest); err != nil {
				t.Errorf("%s links to %s, which does not exist", doc, target)
				continue
			}
			if frag != "" && !headingAnchors(t, dest)[frag] {
				t.Errorf("%s links to %s: no heading with anchor #%s", doc, target, frag)
			}
		}
	}
}
