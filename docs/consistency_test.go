package docs

import (
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"regexp"
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

// documentGlobs find the repository's Markdown documents, new ones included.
var documentGlobs = []string{"*.md", "docs/*.md", "docs/benchmarks/*.md", "*/README.md"}

// TestDocuments runs every check of the documents over the repository's: their relative links
// and anchors resolve, the paths they name exist, no sentence repeats, no paragraph or line
// looks spliced, and none points outside the repository.
func TestDocuments(t *testing.T) {
	repo := os.DirFS("..")
	var names []string
	for _, g := range documentGlobs {
		m, err := fs.Glob(repo, g)
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, m...)
	}
	if len(names) < 5 {
		t.Fatalf("found only %d documents: %v", len(names), names)
	}
	for _, p := range checkRepository(repo, names) {
		t.Error(p)
	}
}

// checkRepository runs every check over the documents names of repo.
func checkRepository(repo fs.FS, names []string) []string {
	r := newRepository(repo)
	var out []string
	for _, name := range names {
		d, err := r.document(name)
		if err != nil {
			out = append(out, fmt.Sprintf("%s: %v", name, err))
			continue
		}
		for _, check := range []func(*repository, *document) []problem{
			checkLinks, checkPaths, checkRepeats, checkSplices, checkPointers,
		} {
			for _, p := range check(r, d) {
				out = append(out, fmt.Sprintf("%s:%d: %s", name, p.line, p.msg))
			}
		}
	}
	return out
}

type problem struct {
	line int
	msg  string
}

// Kinds of lines.
const (
	prose   = iota
	blank   // empty or only spaces
	code    // in a fenced or indented code block, fences included
	table   // a table row
	heading // an ATX heading
	item    // a list item, or a line that continues one
	quote   // a block quote's
	html    // a line of HTML, or a link reference definition
)

type line struct {
	n    int // from 1
	text string
	kind int
}

// document is one Markdown file, its lines classified.
type document struct {
	name  string // slash-separated, from the repository's root
	lines []line
}

var (
	listItemRe = regexp.MustCompile(`^\s*([-*+]|\d+[.)])\s`)
	refDefRe   = regexp.MustCompile(`^\s{0,3}\[[^\]]+\]:\s`)
)

func parseDocument(name, text string) *document {
	d := &document{name: name}
	var fence string // the open fence's marker
	inList := false
	prev := blank
	for i, s := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		trimmed := strings.TrimSpace(s)
		indent := len(s) - len(strings.TrimLeft(s, " \t"))
		kind := prose
		switch {
		case fence != "":
			kind = code
			if strings.HasPrefix(trimmed, fence) && strings.Trim(trimmed, fence[:1]) == "" {
				fence = ""
			}
		case strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~"):
			kind, fence = code, trimmed[:3]
		case trimmed == "":
			kind = blank
		case indent >= 4 && !inList && (prev == blank || prev == code):
			kind = code
		case strings.HasPrefix(trimmed, "|"):
			kind = table
		case strings.HasPrefix(s, "#"):
			kind, inList = heading, false
		case listItemRe.MatchString(s):
			kind, inList = item, true
		case inList && (indent >= 2 || prev == item):
			kind = item
		case strings.HasPrefix(trimmed, ">"):
			kind = quote
		case strings.HasPrefix(trimmed, "<") || refDefRe.MatchString(s):
			kind = html
		}
		if kind == prose || kind == quote || kind == html || kind == table {
			inList = false
		}
		d.lines = append(d.lines, line{n: i + 1, text: s, kind: kind})
		prev = kind
	}
	return d
}

// block is a run of lines of text (not code, not blank), joined by newlines.
type block struct {
	first int // the line number of its first line
	text  string
}

// lineOf is the line number of the byte at offset i of b.text.
func (b *block) lineOf(i int) int { return b.first + strings.Count(b.text[:i], "\n") }

// blocks are d's runs of lines that are not code or blank.
func (d *document) blocks() []*block {
	var out []*block
	var cur *block
	for _, l := range d.lines {
		if l.kind == code || l.kind == blank {
			cur = nil
			continue
		}
		if cur == nil {
			cur = &block{first: l.n}
			out = append(out, cur)
		} else {
			cur.text += "\n"
		}
		cur.text += l.text
	}
	return out
}

// span is an inline code span: its text and offsets in its block.
type span struct {
	start, end int // of the whole span, backticks included
	text       string
}

// codeSpans are the inline code spans of s: a run of backticks to the next run as long.
func codeSpans(s string) []span {
	var out []span
	for i := 0; i < len(s); {
		n := backticks(s, i)
		if n == 0 {
			i++
			continue
		}
		closeAt := -1
		for j := i + n; j < len(s); {
			m := backticks(s, j)
			if m == n {
				closeAt = j
				break
			}
			j += max(m, 1)
		}
		if closeAt < 0 {
			i += n
			continue
		}
		text := strings.TrimSpace(strings.ReplaceAll(s[i+n:closeAt], "\n", " "))
		out = append(out, span{start: i, end: closeAt + n, text: text})
		i = closeAt + n
	}
	return out
}

// backticks is the length of the run of backticks at s[i:].
func backticks(s string, i int) int {
	n := 0
	for i+n < len(s) && s[i+n] == '`' {
		n++
	}
	return n
}

// withoutCode is s with its code spans blanked out (newlines kept, so offsets and lines hold).
func withoutCode(s string) string {
	b := []byte(s)
	for _, sp := range codeSpans(s) {
		for i := sp.start; i < sp.end; i++ {
			if b[i] != '\n' {
				b[i] = ' '
			}
		}
	}
	return string(b)
}

// repository reads a repository's files, and the documents' headings' anchors.
type repository struct {
	fsys      fs.FS
	basenames map[string]bool // of every file, for a file named without its directory
	generated []string        // the paths the .gitignore files name: made, not in the repository
	anchors   map[string]map[string]bool
}

func newRepository(fsys fs.FS) *repository {
	r := &repository{fsys: fsys, basenames: map[string]bool{}, anchors: map[string]map[string]bool{}}
	_ = fs.WalkDir(fsys, ".", func(p string, e fs.DirEntry, err error) error {
		switch {
		case err != nil:
		case e.IsDir() && (e.Name() == "node_modules" || e.Name() == ".git"):
			return fs.SkipDir
		case e.Name() == ".gitignore":
			r.ignore(path.Dir(p))
		case !e.IsDir():
			r.basenames[e.Name()] = true
		}
		return nil
	})
	return r
}

// ignore adds the paths dir/.gitignore names from dir ("/bin/"), which builds and tests make.
func (r *repository) ignore(dir string) {
	b, _ := fs.ReadFile(r.fsys, path.Join(dir, ".gitignore"))
	for _, l := range strings.Split(string(b), "\n") {
		if p := strings.Trim(strings.TrimSpace(l), "/"); strings.HasPrefix(l, "/") && !strings.ContainsAny(p, "*?[") {
			r.generated = append(r.generated, path.Join(dir, p))
		}
	}
}

func (r *repository) document(name string) (*document, error) {
	b, err := fs.ReadFile(r.fsys, name)
	if err != nil {
		return nil, err
	}
	return parseDocument(name, string(b)), nil
}

func (r *repository) exists(p string) bool {
	_, err := fs.Stat(r.fsys, p)
	return err == nil
}

// isGenerated says whether p is under a path the root .gitignore names.
func (r *repository) isGenerated(p string) bool {
	for _, g := range r.generated {
		if p == g || strings.HasPrefix(p, g+"/") {
			return true
		}
	}
	return false
}

// anchorsOf are the anchors of document name's headings (nil when it cannot be read).
func (r *repository) anchorsOf(name string) map[string]bool {
	if a, ok := r.anchors[name]; ok {
		return a
	}
	var a map[string]bool
	if d, err := r.document(name); err == nil {
		a = d.anchors()
	}
	r.anchors[name] = a
	return a
}

var (
	headingMarkRe = regexp.MustCompile(`^#{1,6}\s+|\s+#+\s*$`)
	inlineLinkRe  = regexp.MustCompile(`!?\[([^\]]*)\]\([^)]*\)`)
	htmlTagRe     = regexp.MustCompile(`<[^>]+>`)
)

// anchors are the ids GitHub gives d's headings: the text lower-cased, without punctuation
// but hyphens and underscores, each space a hyphen; a repeated one gets -1, -2 and so on.
func (d *document) anchors() map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, l := range d.lines {
		if l.kind != heading {
			continue
		}
		text := headingMarkRe.ReplaceAllString(l.text, "")
		text = inlineLinkRe.ReplaceAllString(text, "$1")
		text = htmlTagRe.ReplaceAllString(text, "")
		var b strings.Builder
		for _, c := range strings.ToLower(text) {
			switch {
			case c == ' ':
				b.WriteByte('-')
			case c == '-' || c == '_' || unicode.IsLetter(c) || unicode.IsNumber(c) || unicode.Is(unicode.M, c):
				b.WriteRune(c)
			}
		}
		slug := b.String()
		if n := seen[slug]; n > 0 {
			seen[slug]++
			slug = fmt.Sprintf("%s-%d", slug, n)
		} else {
			seen[slug] = 1
		}
		out[slug] = true
	}
	return out
}

var (
	linkRe   = regexp.MustCompile(`\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)`)
	refRe    = regexp.MustCompile(`(?m)^\s{0,3}\[[^\]]+\]:\s*<?(\S+?)>?(?:\s|$)`)
	schemeRe = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// checkLinks: every relative link resolves to a file or directory of the repository, and its
// #anchor to a heading of the document it names.
func checkLinks(r *repository, d *document) []problem {
	var out []problem
	for _, b := range d.blocks() {
		text := withoutCode(b.text)
		var targets [][]int
		targets = append(targets, linkRe.FindAllStringSubmatchIndex(text, -1)...)
		targets = append(targets, refRe.FindAllStringSubmatchIndex(text, -1)...)
		for _, m := range targets {
			target := text[m[2]:m[3]]
			if schemeRe.MatchString(target) || strings.HasPrefix(target, "//") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			if f, err := url.PathUnescape(file); err == nil {
				file = f
			}
			p := d.name
			switch {
			case strings.HasPrefix(file, "/"):
				p = path.Clean(strings.TrimPrefix(file, "/"))
			case file != "":
				p = path.Join(path.Dir(d.name), file)
			}
			n := b.lineOf(m[2])
			switch {
			case p == ".." || strings.HasPrefix(p, "../"):
				continue // checkPointers reports it
			case !r.exists(p):
				out = append(out, problem{n, fmt.Sprintf("link %s: %s does not exist", target, p)})
			case anchor != "" && strings.HasSuffix(p, ".md") && !r.anchorsOf(p)[anchor]:
				out = append(out, problem{n, fmt.Sprintf("link %s: %s has no heading #%s", target, p, anchor)})
			}
		}
	}
	return out
}

var (
	fileNameRe    = regexp.MustCompile(`^[\w.-]+\.(md|mod|sum|go|sh|mjs|js|yaml|yml|rst|sql|toml|service)$|^(Makefile|Dockerfile)$`)
	lineSuffixRe  = regexp.MustCompile(`(:\d+(-\d+)?|#.*)$`)
	pathCharsRe   = regexp.MustCompile(`^[\w./*-]+$`)
	packageDotsRe = regexp.MustCompile(`/\.\.\.$`)
)

// checkPaths: every path of the repository a document names in backticks exists: a span that
// starts with a top-level directory and has a slash, or that names a file (go.mod, doc.go).
func checkPaths(r *repository, d *document) []problem {
	var out []problem
	for _, b := range d.blocks() {
		for _, sp := range codeSpans(b.text) {
			p := lineSuffixRe.ReplaceAllString(sp.text, "")
			p = strings.TrimPrefix(packageDotsRe.ReplaceAllString(p, ""), "./")
			if !pathCharsRe.MatchString(p) || r.isGenerated(strings.TrimSuffix(p, "/")) || designFileRe.MatchString(p) {
				continue // a design file is checkPointers'
			}
			first, _, hasSlash := strings.Cut(p, "/")
			n := b.lineOf(sp.start)
			switch {
			case hasSlash && isDir(r, first):
				if dir, _, wild := cutPattern(p); wild {
					// A pattern: the directory it is in exists.
					if dir = path.Dir(dir + "x"); !r.exists(dir) {
						out = append(out, problem{n, fmt.Sprintf("`%s`: %s does not exist", sp.text, dir)})
					}
				} else if !r.exists(path.Clean(p)) {
					out = append(out, problem{n, fmt.Sprintf("`%s`: no such file or directory", sp.text)})
				}
			case !hasSlash && fileNameRe.MatchString(p) && !r.basenames[p]:
				out = append(out, problem{n, fmt.Sprintf("`%s`: no file of the repository has that name", sp.text)})
			}
		}
	}
	return out
}

// placeholderRe is a name's part that stands for what the reader chooses: NNNN_name.sql.
var placeholderRe = regexp.MustCompile(`\*|NNN+|XXX+`)

// cutPattern cuts p before its first wildcard or placeholder.
func cutPattern(p string) (before, after string, found bool) {
	if loc := placeholderRe.FindStringIndex(p); loc != nil {
		return p[:loc[0]], p[loc[0]:], true
	}
	return p, "", false
}

func isDir(r *repository, name string) bool {
	st, err := fs.Stat(r.fsys, name)
	return err == nil && st.IsDir()
}

// sentenceEndRe ends a sentence: a full stop, question or exclamation mark, then a space.
var sentenceEndRe = regexp.MustCompile(`[.!?]["')\]]*\s+`)

// checkRepeats: no sentence of ten words or more appears twice in one document (outside code
// blocks and tables).
func checkRepeats(_ *repository, d *document) []problem {
	var out []problem
	seen := map[string]int{}
	for _, u := range d.units() {
		// A link counts by its text: its URL is blanked, offsets kept.
		text := linkTargetRe.ReplaceAllStringFunc(u.text, func(s string) string {
			return "]" + strings.Repeat(" ", len(s)-1)
		})
		start := 0
		ends := append(sentenceEndRe.FindAllStringIndex(text, -1), []int{len(text), len(text)})
		for _, e := range ends {
			s := text[start:e[0]]
			offset := start + len(s) - len(strings.TrimLeft(s, " \n"))
			start = e[1]
			words := strings.Fields(strings.ToLower(strings.NewReplacer("[", "", "]", "", "*", "").Replace(s)))
			if len(words) > 0 && listItemRe.MatchString(words[0]+" ") {
				words = words[1:]
			}
			if len(words) < 10 {
				continue
			}
			key := strings.Join(words, " ")
			n := u.lineOf(offset)
			if first, ok := seen[key]; ok {
				out = append(out, problem{n, fmt.Sprintf("repeats the sentence of line %d: %q", first, key)})
			} else {
				seen[key] = n
			}
		}
	}
	return out
}

var linkTargetRe = regexp.MustCompile(`\]\([^)]*\)`)

// units are d's paragraphs and list items: the runs of prose, list or quote lines, a list item
// starting a new one.
func (d *document) units() []*block {
	var out []*block
	var cur *block
	for _, l := range d.lines {
		switch {
		case l.kind != prose && l.kind != item && l.kind != quote:
			cur = nil
			continue
		case cur == nil, l.kind == item && listItemRe.MatchString(l.text):
			cur = &block{first: l.n, text: l.text}
			out = append(out, cur)
		default:
			cur.text += "\n" + l.text
		}
	}
	return out
}

// maxLine is the longest prose line, a link's URL counted as one character.
const maxLine = 120

var urlRe = regexp.MustCompile(`\]\([^)]*\)|<https?://[^>]*>|https?://\S+`)

// checkSplices: a paragraph that starts with a lower-case word (outside lists, code and tables)
// is the tail of a sentence whose head was cut, and a prose line longer than maxLine the
// joint of two.
func checkSplices(_ *repository, d *document) []problem {
	var out []problem
	prev := blank
	for _, l := range d.lines {
		if l.kind == prose && prev != prose && prev != item && prev != quote {
			if c, _ := utf8.DecodeRuneInString(strings.TrimSpace(l.text)); unicode.IsLower(c) {
				out = append(out, problem{l.n, fmt.Sprintf("paragraph starts with a lower-case word: %.60q", l.text)})
			}
		}
		prev = l.kind
		if l.kind == code || l.kind == table || l.kind == html {
			continue
		}
		short := urlRe.ReplaceAllStringFunc(l.text, func(u string) string {
			if strings.HasPrefix(u, "](") {
				return "](u)"
			}
			return "u"
		})
		if n := utf8.RuneCountInString(short); n > maxLine {
			out = append(out, problem{l.n, fmt.Sprintf("line of %d characters (at most %d): %.60q", n, maxLine, l.text)})
		}
	}
	return out
}

var (
	designFileRe = regexp.MustCompile(`(?i)\b(architecture\.md|realtime-api\.rst)\b`)
	issueRe      = regexp.MustCompile(`(?i)\bissue\s*#?\d+|\bthe issue\b|/issues/\d+`)
	parentRe     = regexp.MustCompile(`(?:\.\./)+[^\s)\]>"'` + "`" + `]*`)
)

// checkPointers: no document points outside the repository (a design file, a ../ path that
// leaves it or finds nothing in it) or at an issue.
func checkPointers(r *repository, d *document) []problem {
	var out []problem
	for _, l := range d.lines {
		for _, m := range designFileRe.FindAllString(l.text, -1) {
			out = append(out, problem{l.n, fmt.Sprintf("points at %s, which is not in the repository", m)})
		}
		for _, m := range issueRe.FindAllString(l.text, -1) {
			out = append(out, problem{l.n, fmt.Sprintf("points at an issue (%q): say what it says instead", m)})
		}
		for _, loc := range parentRe.FindAllStringIndex(l.text, -1) {
			m := l.text[loc[0]:loc[1]]
			file, _, _ := strings.Cut(m, "#")
			link := strings.HasSuffix(l.text[:loc[0]], "](") // checkLinks resolves those
			switch p := path.Join(path.Dir(d.name), file); {
			case p == ".." || strings.HasPrefix(p, "../"):
				out = append(out, problem{l.n, fmt.Sprintf("%s points outside the repository", m)})
			case !r.exists(p) && l.kind != code && !link:
				out = append(out, problem{l.n, fmt.Sprintf("%s: %s is not in the repository", m, p)})
			}
		}
	}
	return out
}
