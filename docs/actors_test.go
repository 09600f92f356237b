package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/ballet/gateway/streams"
)

// actorKindArg is, for the functions that take an event's actor, the index of the actor kind
// among their arguments.
var actorKindArg = map[string]int{
	"Grant": 4, "Revoke": 3, "ChangeSubject": 3, "CreateProjectAs": 3,
	"ProjectCreatedEventBy": 2, "MemberGrantedEvent": 3, "MemberRevokedEvent": 2, "projectEvent": 2,
	"SubjectEvent": 2, "CheckSubjectChange": 2,
}

// writtenActorKinds returns the actor kinds the server's code writes as string literals (outside
// tests and test helpers), with where each is written: the arguments of the functions that take
// an actor kind, Actor literals' Kind, ActorKind fields, and constants and variables named for
// an actor kind.
func writtenActorKinds(t *testing.T) map[string]string {
	t.Helper()
	found := map[string]string{}
	fset := token.NewFileSet()
	lit := func(e ast.Expr) {
		if b, ok := e.(*ast.BasicLit); ok && b.Kind == token.STRING {
			if v, err := strconv.Unquote(b.Value); err == nil {
				found[v] = fset.Position(b.Pos()).String()
			}
		}
	}
	kindName := regexp.MustCompile(`^(Actor(Human|Agent|Service|System|[A-Z]\w*Kind)|\w*[aA]ctorKind|kind)$`)
	err := filepath.WalkDir("..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); n == "node_modules" || n == "testdata" || strings.HasSuffix(n, "test") || strings.HasPrefix(n, ".") && n != ".." {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.CallExpr:
				name := ""
				switch fn := n.Fun.(type) {
				case *ast.Ident:
					name = fn.Name
				case *ast.SelectorExpr:
					name = fn.Sel.Name
				}
				if i, ok := actorKindArg[name]; ok && i < len(n.Args) {
					lit(n.Args[i])
				}
			case *ast.CompositeLit:
				for _, el := range n.Elts {
					if kv, ok := el.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && (k.Name == "ActorKind" || k.Name == "Kind" && strings.Contains(exprName(n.Type), "Actor")) {
							lit(kv.Value)
						}
					}
				}
			case *ast.AssignStmt:
				for i, l := range n.Lhs {
					if i < len(n.Rhs) && (exprName(l) == "ActorKind" || exprName(l) == "kind" && strings.Contains(p, "streams")) {
						lit(n.Rhs[i])
					}
				}
			case *ast.ValueSpec:
				for i, id := range n.Names {
					if i < len(n.Values) && kindName.MatchString(id.Name) && id.Name != "kind" {
						lit(n.Values[i])
					}
				}
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

// exprName is the last name of an identifier, selector or type expression ("" otherwise).
func exprName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return e.Sel.Name
	}
	return ""
}

// TestActorKinds: the actor kinds asyncapi.yaml, event-log.md and the browser client's type
// declarations allow are exactly those the gateway writes (streams.ActorKinds), and the code
// writes no other.
func TestActorKinds(t *testing.T) {
	t.Parallel()
	want := slices.Sorted(slices.Values(streams.ActorKinds()))
	for kind, where := range writtenActorKinds(t) {
		if !slices.Contains(want, kind) {
			t.Errorf("%s writes actor kind %q, which streams.ActorKinds lacks", where, kind)
		}
	}
	read := func(p string) string {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	same := func(doc string, got []string) {
		t.Helper()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Errorf("%s allows actor kinds %v, the gateway writes %v", doc, got, want)
		}
	}

	// asyncapi.yaml: the enum of components.schemas.Actor.properties.kind.
	y := read("asyncapi.yaml")
	i := strings.Index(y, "\n    Actor:\n")
	j := strings.Index(y[max(i, 0):], "\n        kind:\n")
	if i < 0 || j < 0 {
		t.Fatal("asyncapi.yaml: no Actor schema with a kind")
	}
	var enum []string
	rest := y[i+j+len("\n        kind:\n"):]
	for _, line := range strings.Split(rest, "\n") {
		if v, ok := strings.CutPrefix(line, "            - "); ok {
			enum = append(enum, strings.TrimSpace(v))
		} else if !strings.HasPrefix(line, "          ") {
			break
		}
	}
	same("asyncapi.yaml Actor.kind", enum)

	// event-log.md: the actor_kind row of the table, and the Actors table's first column.
	md := read("event-log.md")
	row := regexp.MustCompile("(?m)^\\| `actor_kind` \\|[^|]*\\|[^|]*\\|([^|]*)\\|$").FindStringSubmatch(md)
	if row == nil {
		t.Fatal("event-log.md: no actor_kind row")
	}
	same("event-log.md actor_kind row", quoted(row[1]))
	var sec string
	if _, after, ok := strings.Cut(md, "\n## Actors\n"); ok {
		sec, _, _ = strings.Cut(after, "\n## ")
	}
	var table []string
	for _, m := range regexp.MustCompile("(?m)^\\| `(\\w+)` \\|").FindAllStringSubmatch(sec, -1) {
		if m[1] != "actor_kind" {
			table = append(table, m[1])
		}
	}
	same("event-log.md Actors table", table)

	// The browser client's declarations: Actor's kind is a union of string literals.
	dts := read("../web/src/client/types/wire.d.ts")
	m := regexp.MustCompile(`(?s)export type Actor = \{.*?\bkind: ([^;]+);`).FindStringSubmatch(dts)
	if m == nil {
		t.Fatal("wire.d.ts: no Actor type with a kind")
	}
	var union []string
	for _, s := range strings.Split(m[1], "|") {
		union = append(union, strings.Trim(strings.TrimSpace(s), `"'`))
	}
	same("web client Actor.kind", union)
}

// quoted returns the `code` spans of s.
func quoted(s string) []string {
	var out []string
	for _, m := range regexp.MustCompile("`(\\w+)`").FindAllStringSubmatch(s, -1) {
		out = append(out, m[1])
	}
	return out
}
