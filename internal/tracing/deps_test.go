package tracing

import (
	"os/exec"
	"strings"
	"testing"
)

// The exporter is what links gRPC, grpc-gateway and genproto into the server; -tags nootlp
// leaves all three out (README, "Dependencies"). Prometheus's client still links protobuf.
func TestNoOTLPBuildLeavesGRPCOut(t *testing.T) {
	if testing.Short() {
		t.Skip("lists the server's dependencies with the go command")
	}
	list := func(tags string) string {
		out, err := exec.Command("go", "list", "-deps", "-tags", tags, "github.com/ballet/gateway/cmd/ballet-gateway").CombinedOutput()
		if err != nil {
			t.Fatalf("go list -tags %q: %v\n%s", tags, err, out)
		}
		return string(out)
	}
	heavy := []string{"google.golang.org/grpc\n", "github.com/grpc-ecosystem/grpc-gateway/", "google.golang.org/genproto/"}
	with, without := list(""), list("nootlp")
	for _, p := range heavy {
		if !strings.Contains(with, p) {
			t.Errorf("the default build no longer links %q: the README's dependency note is out of date", strings.TrimSpace(p))
		}
		if strings.Contains(without, p) {
			t.Errorf("-tags nootlp still links %q", strings.TrimSpace(p))
		}
	}
}
