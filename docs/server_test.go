package docs

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/coder/websocket"

	"github.com/ballet/gateway/protocol"
	"github.com/ballet/gateway/rpc"
)

// What the server says about itself: the lists that the descriptions must match are the ones
// the code runs on (the protocol table, rpc's codes, and what is read from the gateway's
// source), not copies kept beside the tests.

// parseDir parses the non-test Go files of a package directory (relative to the repository).
func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("..", dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, p := range paths {
		if strings.HasSuffix(p, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, p, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

func stringLit(e ast.Expr) (string, bool) {
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.STRING {
		return "", false
	}
	s, err := strconv.Unquote(lit.Value)
	return s, err == nil
}

func intLit(e ast.Expr) (int, bool) {
	neg := false
	if u, ok := e.(*ast.UnaryExpr); ok && u.Op == token.SUB {
		neg, e = true, u.X
	}
	lit, ok := e.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return 0, false
	}
	n, err := strconv.Atoi(lit.Value)
	if neg {
		n = -n
	}
	return n, err == nil
}

// jsonFields returns the JSON names of the fields of struct type t, each with whether it is
// omitempty.
func jsonFields(t reflect.Type) map[string]bool {
	fields := map[string]bool{}
	for f := range t.Fields() {
		opts := strings.Split(f.Tag.Get("json"), ",")
		fields[opts[0]] = slices.Contains(opts[1:], "omitempty")
	}
	return fields
}

// serverErrorCodes are the codes the gateway answers with, each with its name: JSON-RPC's own
// (package rpc's) and the realtime API's (package protocol's table).
func serverErrorCodes() map[int]string {
	codes := map[int]string{}
	for _, e := range []*rpc.Error{rpc.ErrParse, rpc.ErrInvalidRequest, rpc.ErrMethodNotFound, rpc.ErrInvalidParams, rpc.ErrInternal} {
		codes[e.Code] = e.Message
	}
	for _, c := range protocol.Codes() {
		codes[int(c)] = c.Error()
	}
	return codes
}

// wsStatus is every close code coder/websocket names; the gateway's use of one not listed
// fails the test, so that a new close cannot go undocumented.
var wsStatus = map[string]websocket.StatusCode{
	"StatusNormalClosure":           websocket.StatusNormalClosure,
	"StatusGoingAway":               websocket.StatusGoingAway,
	"StatusProtocolError":           websocket.StatusProtocolError,
	"StatusUnsupportedData":         websocket.StatusUnsupportedData,
	"StatusNoStatusRcvd":            websocket.StatusNoStatusRcvd,
	"StatusAbnormalClosure":         websocket.StatusAbnormalClosure,
	"StatusInvalidFramePayloadData": websocket.StatusInvalidFramePayloadData,
	"StatusPolicyViolation":         websocket.StatusPolicyViolation,
	"StatusMessageTooBig":           websocket.StatusMessageTooBig,
	"StatusMandatoryExtension":      websocket.StatusMandatoryExtension,
	"StatusInternalError":           websocket.StatusInternalError,
	"StatusServiceRestart":          websocket.StatusServiceRestart,
	"StatusTryAgainLater":           websocket.StatusTryAgainLater,
	"StatusBadGateway":              websocket.StatusBadGateway,
	"StatusTLSHandshake":            websocket.StatusTLSHandshake,
}

// serverCloseCodes are the close codes the gateway closes with: the websocket package's Status
// constants its code names (the sessions' and, for the frames their connections refuse,
// gateway/internal/wsnet's), and the realtime API's own (package protocol's table). A close
// code the gateway declares itself, not from the table, fails the test.
func serverCloseCodes(t *testing.T) map[int]string {
	t.Helper()
	codes := map[int]string{}
	for _, c := range protocol.CloseCodes() {
		codes[c] = "protocol"
	}
	for _, f := range append(parseDir(t, "gateway"), parseDir(t, "gateway/internal/wsnet")...) {
		ast.Inspect(f, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				pkg, ok := n.X.(*ast.Ident)
				if !ok || pkg.Name != "websocket" || !strings.HasPrefix(n.Sel.Name, "Status") || n.Sel.Name == "StatusCode" {
					return true
				}
				code, known := wsStatus[n.Sel.Name]
				if !known {
					t.Errorf("gateway uses websocket.%s: add it to wsStatus, and document it", n.Sel.Name)
				}
				codes[int(code)] = "websocket." + n.Sel.Name
			case *ast.ValueSpec:
				sel, ok := n.Type.(*ast.SelectorExpr)
				if !ok || sel.Sel.Name != "StatusCode" {
					return true
				}
				for i, name := range n.Names {
					if i >= len(n.Values) {
						break
					}
					if v, ok := n.Values[i].(*ast.SelectorExpr); !ok || v.X.(*ast.Ident).Name != "protocol" {
						t.Errorf("gateway.%s: a close code of the gateway's own; put it in package protocol's table", name.Name)
					}
				}
			}
			return true
		})
	}
	return codes
}
