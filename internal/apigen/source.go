package apigen

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"reflect"
	"strings"
)

// docs are protocol's comments: a type's doc comment without its name, and each field's line
// comment, keyed "<key> <type>".
type docs struct {
	types, fields map[string]string
}

func readDocs(dir string) (docs, error) {
	d := docs{types: map[string]string{}, fields: map[string]string{}}
	fset := token.NewFileSet()
	pkgs, err := parser.ParseDir(fset, dir, nil, parser.ParseComments)
	if err != nil {
		return d, err
	}
	pkg, ok := pkgs["protocol"]
	if !ok {
		return d, fmt.Errorf("apigen: no package protocol in %s", dir)
	}
	for _, file := range pkg.Files {
		for _, decl := range file.Decls {
			gd, ok := decl.(*ast.GenDecl)
			if !ok || gd.Tok != token.TYPE {
				continue
			}
			for _, spec := range gd.Specs {
				ts := spec.(*ast.TypeSpec)
				if gd.Doc != nil {
					d.types[ts.Name.Name] = sentence(gd.Doc.Text(), ts.Name.Name)
				}
				st, ok := ts.Type.(*ast.StructType)
				if !ok {
					continue
				}
				for _, f := range st.Fields.List {
					if f.Comment == nil || f.Tag == nil {
						continue
					}
					tag := reflect.StructTag(strings.Trim(f.Tag.Value, "`"))
					key, _, _ := strings.Cut(tag.Get("json"), ",")
					d.fields[key+" "+ts.Name.Name] = strings.TrimSpace(f.Comment.Text())
				}
			}
		}
	}
	return d, nil
}

// sentence is a doc comment's first sentence, without "<name> is ".
func sentence(doc, name string) string {
	doc = strings.Join(strings.Fields(doc), " ")
	if i := strings.Index(doc, ". "); i >= 0 {
		doc = doc[:i]
	}
	doc = strings.TrimSuffix(doc, ".")
	doc = strings.TrimPrefix(doc, name+" is ")
	return doc
}
