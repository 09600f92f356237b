package deploy

import (
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"
)

const k8sDir = "kubernetes"

// k8sKinds is every manifest with the apiVersion and kind it must hold.
var k8sKinds = map[string][2]string{
	"kustomization.yaml":       {"kustomize.config.k8s.io/v1beta1", "Kustomization"},
	"configmap.yaml":           {"v1", "ConfigMap"},
	"secret.yaml":              {"v1", "Secret"},
	"deployment.yaml":          {"apps/v1", "Deployment"},
	"service.yaml":             {"v1", "Service"},
	"poddisruptionbudget.yaml": {"policy/v1", "PodDisruptionBudget"},
	"migrate-job.yaml":         {"batch/v1", "Job"},
	"servicemonitor.yaml":      {"monitoring.coreos.com/v1", "ServiceMonitor"},
}

// manifests parses every YAML file of deploy/kubernetes, one document each.
func manifests(t *testing.T) map[string]any {
	t.Helper()
	entries, err := os.ReadDir(k8sDir)
	if err != nil {
		t.Fatal(err)
	}
	var names, paths []string
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".yaml") || strings.HasSuffix(e.Name(), ".yml") {
			names = append(names, e.Name())
			paths = append(paths, filepath.Join(k8sDir, e.Name()))
		}
	}
	docs := loadYAML(t, paths...)
	out := map[string]any{}
	for i, name := range names {
		want, known := k8sKinds[name]
		if !known {
			t.Errorf("%s: unexpected manifest (add it to k8sKinds and the kustomization)", name)
			continue
		}
		if len(docs[i]) != 1 {
			t.Fatalf("%s: %d YAML documents, want 1", name, len(docs[i]))
		}
		d := docs[i][0]
		if got := [2]string{str(d, "apiVersion"), str(d, "kind")}; got != want {
			t.Errorf("%s: apiVersion/kind %v, want %v", name, got, want)
		}
		if name != "kustomization.yaml" && str(d, "metadata", "name") == "" {
			t.Errorf("%s: no metadata.name", name)
		}
		out[name] = d
	}
	for name := range k8sKinds {
		if out[name] == nil {
			t.Errorf("missing %s", name)
		}
	}
	return out
}

func TestKustomization(t *testing.T) {
	m := manifests(t)
	k := m["kustomization.yaml"]
	var res []string
	for _, r := range list(k, "resources") {
		s, _ := r.(string)
		res = append(res, s)
	}
	var want []string
	for name := range m {
		if name != "kustomization.yaml" {
			want = append(want, name)
		}
	}
	sort.Strings(res)
	sort.Strings(want)
	if !slices.Equal(res, want) {
		t.Errorf("kustomization resources %v, want every manifest %v", res, want)
	}
	images := list(k, "images")
	if len(images) != 1 || str(images[0], "name") != "ballet-gateway" || str(images[0], "newName") == "" {
		t.Errorf("kustomization images %v: want one entry naming ballet-gateway with a newName", images)
	}
}

// containerPorts maps a container's port names to numbers.
func containerPorts(c any) map[string]int {
	ports := map[string]int{}
	for _, p := range list(c, "ports") {
		n, _ := num(p, "containerPort")
		ports[str(p, "name")] = int(n)
	}
	return ports
}

// probePort resolves a probe's httpGet port, by number or name.
func probePort(t *testing.T, probe any, ports map[string]int) int {
	t.Helper()
	switch p := get(probe, "httpGet", "port").(type) {
	case float64:
		return int(p)
	case string:
		if n, ok := ports[p]; ok {
			return n
		}
		t.Errorf("probe names port %q, which the container does not declare", p)
	}
	return 0
}

func addrPort(t *testing.T, name, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, addr, err)
	}
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatalf("%s=%q: %v", name, addr, err)
	}
	return n
}

// checkPodSecurity checks a pod template runs unprivileged with bounded
// resources.
func checkPodSecurity(t *testing.T, what string, spec any) {
	t.Helper()
	if get(spec, "securityContext", "runAsNonRoot") != true {
		t.Errorf("%s: pod securityContext.runAsNonRoot is not true", what)
	}
	if uid, ok := num(spec, "securityContext", "runAsUser"); !ok || uid == 0 {
		t.Errorf("%s: pod securityContext.runAsUser = %v, want a non-root uid", what, uid)
	}
	for _, c := range list(spec, "containers") {
		name := what + " container " + str(c, "name")
		sc := get(c, "securityContext")
		if get(sc, "readOnlyRootFilesystem") != true {
			t.Errorf("%s: readOnlyRootFilesystem is not true", name)
		}
		if get(sc, "allowPrivilegeEscalation") != false {
			t.Errorf("%s: allowPrivilegeEscalation is not false", name)
		}
		if drop := list(sc, "capabilities", "drop"); !slices.Contains(drop, any("ALL")) {
			t.Errorf("%s: capabilities.drop = %v, want [ALL]", name, drop)
		}
		for _, kind := range []string{"requests", "limits"} {
			for _, res := range []string{"cpu", "memory"} {
				if get(c, "resources", kind, res) == nil {
					t.Errorf("%s: no resources.%s.%s", name, kind, res)
				}
			}
		}
	}
}

// envNames returns the variable names a container sets, with those its
// envFrom sources provide.
func envNames(t *testing.T, m map[string]any, c any) map[string]string {
	t.Helper()
	names := map[string]string{}
	for _, e := range list(c, "env") {
		names[str(e, "name")] = "env"
		if ref := get(e, "valueFrom", "secretKeyRef"); ref != nil {
			checkRef(t, m, "secret.yaml", str(ref, "name"), str(ref, "key"))
		}
		if ref := get(e, "valueFrom", "configMapKeyRef"); ref != nil {
			checkRef(t, m, "configmap.yaml", str(ref, "name"), str(ref, "key"))
		}
	}
	for _, from := range list(c, "envFrom") {
		file, ref := "configmap.yaml", get(from, "configMapRef")
		if ref == nil {
			file, ref = "secret.yaml", get(from, "secretRef")
		}
		if str(m[file], "metadata", "name") != str(ref, "name") {
			t.Errorf("envFrom names %q, which the kustomization does not define", str(ref, "name"))
			continue
		}
		for _, k := range dataKeys(m[file]) {
			names[k] = file
		}
	}
	return names
}

func dataKeys(obj any) []string {
	var out []string
	for _, field := range []string{"data", "stringData"} {
		for k := range dict(obj, field) {
			out = append(out, k)
		}
	}
	return out
}

func checkRef(t *testing.T, m map[string]any, file, name, key string) {
	t.Helper()
	if str(m[file], "metadata", "name") != name || !slices.Contains(dataKeys(m[file]), key) {
		t.Errorf("a reference to %s key %s, which %s does not define", name, key, file)
	}
}

func TestDeployment(t *testing.T) {
	m := manifests(t)
	vars := documentedVars(t)
	d := m["deployment.yaml"]
	if n, _ := num(d, "spec", "replicas"); n != 3 {
		t.Errorf("replicas = %v, want 3", n)
	}
	podLabels := dict(d, "spec", "template", "metadata", "labels")
	for k, v := range dict(d, "spec", "selector", "matchLabels") {
		if podLabels[k] != v {
			t.Errorf("selector %s=%v does not match the pod labels %v", k, v, podLabels)
		}
	}
	spec := get(d, "spec", "template", "spec")
	checkPodSecurity(t, "deployment", spec)
	cs := list(spec, "containers")
	if len(cs) != 1 {
		t.Fatalf("%d containers, want 1", len(cs))
	}
	c := cs[0]
	if str(c, "image") != "ballet-gateway" {
		t.Errorf("image %q, want ballet-gateway (the kustomization sets the real one)", str(c, "image"))
	}
	if args := list(c, "args"); len(args) != 1 || args[0] != "serve" {
		t.Errorf("args %v, want [serve]", args)
	}
	ports := containerPorts(c)
	if ports["http"] != 8080 || ports["metrics"] != 8081 {
		t.Errorf("container ports %v, want http 8080 and metrics 8081", ports)
	}

	env := map[string]string{}
	for _, e := range list(c, "env") {
		env[str(e, "name")] = str(e, "value")
	}
	if got := addrPort(t, "BALLET_ADDR", env["BALLET_ADDR"]); got != ports["http"] {
		t.Errorf("BALLET_ADDR listens on %d, the http port is %d", got, ports["http"])
	}
	if env["BALLET_ADMIN_ADDR"] != "0.0.0.0:8081" {
		t.Errorf("BALLET_ADMIN_ADDR = %q, want 0.0.0.0:8081 so probes and Prometheus reach it", env["BALLET_ADMIN_ADDR"])
	}
	names := envNames(t, m, c)
	for name := range names {
		if !vars[name] {
			t.Errorf("deployment sets %s, which docs/configuration.md does not document", name)
		}
	}
	for _, name := range requiredByServe {
		if names[name] == "" {
			t.Errorf("deployment does not set %s, which serve requires", name)
		}
	}
	if names["BALLET_DATABASE_URL"] != "secret.yaml" || names["BALLET_PLANNER_API_KEY"] != "secret.yaml" {
		t.Errorf("the database URL and the planner API key must come from the Secret: %v", names)
	}
	for _, name := range []string{"BALLET_OIDC_ISSUER", "BALLET_OIDC_AUDIENCE", "BALLET_ALLOWED_ORIGINS"} {
		if names[name] != "configmap.yaml" {
			t.Errorf("%s does not come from the ConfigMap", name)
		}
	}

	// Probes: readiness on /readyz and liveness on /healthz, both on the
	// admin port, which answers until the process exits.
	ready, live := get(c, "readinessProbe"), get(c, "livenessProbe")
	if str(ready, "httpGet", "path") != "/readyz" || probePort(t, ready, ports) != 8081 {
		t.Errorf("readinessProbe %v, want GET /readyz on 8081", ready)
	}
	if str(live, "httpGet", "path") != "/healthz" || probePort(t, live, ports) != 8081 {
		t.Errorf("livenessProbe %v, want GET /healthz on 8081", live)
	}
	if sp := get(c, "startupProbe"); sp != nil && str(sp, "httpGet", "path") != "/healthz" {
		t.Errorf("startupProbe %v, want GET /healthz", sp)
	}

	// Shutdown: preStop sleep, then the drain window, then the margin the
	// process allows itself, all inside the grace period.
	drain := parseDuration(t, "BALLET_DRAIN_WINDOW", env["BALLET_DRAIN_WINDOW"])
	sleep, ok := num(c, "lifecycle", "preStop", "sleep", "seconds")
	if !ok || sleep <= 0 {
		t.Error("no preStop sleep: the endpoint must leave the load balancers before draining starts")
	}
	grace, _ := num(spec, "terminationGracePeriodSeconds")
	need := time.Duration(sleep)*time.Second + drain + drainMargin
	if time.Duration(grace)*time.Second < need {
		t.Errorf("terminationGracePeriodSeconds = %v, want at least %v (preStop %vs + drain %v + %v)",
			grace, need, sleep, drain, drainMargin)
	}
	if u, _ := num(d, "spec", "strategy", "rollingUpdate", "maxUnavailable"); u != 0 {
		t.Errorf("rollingUpdate.maxUnavailable = %v, want 0", u)
	}
}

func TestMigrationJob(t *testing.T) {
	m := manifests(t)
	vars := documentedVars(t)
	j := m["migrate-job.yaml"]
	if _, ok := num(j, "spec", "backoffLimit"); !ok {
		t.Error("no backoffLimit")
	}
	if _, ok := num(j, "spec", "ttlSecondsAfterFinished"); !ok {
		t.Error("no ttlSecondsAfterFinished")
	}
	spec := get(j, "spec", "template", "spec")
	if rp := str(spec, "restartPolicy"); rp != "Never" && rp != "OnFailure" {
		t.Errorf("restartPolicy %q", rp)
	}
	checkPodSecurity(t, "migration job", spec)
	c := get(spec, "containers", 0)
	if args := list(c, "args"); len(args) != 1 || args[0] != "migrate" {
		t.Errorf("args %v, want [migrate]", args)
	}
	if img, want := str(c, "image"), str(m["deployment.yaml"], "spec", "template", "spec", "containers", 0, "image"); img != want {
		t.Errorf("job image %q differs from the deployment's %q", img, want)
	}
	names := envNames(t, m, c)
	for name := range names {
		if !vars[name] {
			t.Errorf("job sets %s, which docs/configuration.md does not document", name)
		}
	}
	if names["BALLET_DATABASE_URL"] == "" {
		t.Error("job does not set BALLET_DATABASE_URL")
	}
}

func TestConfigObjects(t *testing.T) {
	m := manifests(t)
	vars := documentedVars(t)
	for _, file := range []string{"configmap.yaml", "secret.yaml"} {
		for _, k := range dataKeys(m[file]) {
			if !vars[k] {
				t.Errorf("%s: %s is not a variable of docs/configuration.md", file, k)
			}
		}
	}
	checkSampleProvider(t, "configmap.yaml", str(m["configmap.yaml"], "data", "BALLET_PLANNER_PROVIDER"))
	// Settings that must agree with the pod spec live in the Deployment.
	for _, k := range dataKeys(m["configmap.yaml"]) {
		if k == "BALLET_ADDR" || k == "BALLET_ADMIN_ADDR" || k == "BALLET_DRAIN_WINDOW" {
			t.Errorf("configmap.yaml sets %s; the deployment sets it next to what it must agree with", k)
		}
	}
}

func TestServiceAndFriends(t *testing.T) {
	m := manifests(t)
	d := m["deployment.yaml"]
	podLabels := dict(d, "spec", "template", "metadata", "labels")
	ports := containerPorts(get(d, "spec", "template", "spec", "containers", 0))
	matches := func(what string, sel map[string]any, labels map[string]any) {
		if len(sel) == 0 {
			t.Errorf("%s: empty selector", what)
		}
		for k, v := range sel {
			if labels[k] != v {
				t.Errorf("%s: selector %s=%v does not match %v", what, k, v, labels)
			}
		}
	}

	s := m["service.yaml"]
	matches("service", dict(s, "spec", "selector"), podLabels)
	svcPorts := map[string]float64{}
	for _, p := range list(s, "spec", "ports") {
		n, _ := num(p, "port")
		svcPorts[str(p, "name")] = n
		tp := get(p, "targetPort")
		if name, ok := tp.(string); ok && ports[name] == 0 {
			t.Errorf("service port %s targets %q, which the container does not declare", str(p, "name"), name)
		}
	}
	if svcPorts["http"] != 8080 || svcPorts["metrics"] != 8081 {
		t.Errorf("service ports %v, want http 8080 and metrics 8081", svcPorts)
	}

	pdb := m["poddisruptionbudget.yaml"]
	matches("pdb", dict(pdb, "spec", "selector", "matchLabels"), podLabels)
	maxU, hasMax := num(pdb, "spec", "maxUnavailable")
	_, hasMin := num(pdb, "spec", "minAvailable")
	if (!hasMax || maxU != 1) && !hasMin {
		t.Error("pdb: want maxUnavailable 1 or a minAvailable")
	}

	sm := m["servicemonitor.yaml"]
	matches("servicemonitor", dict(sm, "spec", "selector", "matchLabels"), dict(s, "metadata", "labels"))
	eps := list(sm, "spec", "endpoints")
	if len(eps) != 1 || str(eps[0], "port") != "metrics" || str(eps[0], "path") != "/metrics" {
		t.Errorf("servicemonitor endpoints %v, want port metrics, path /metrics", eps)
	}
}

// TestKustomizeBuild renders the kustomization as kubectl would apply it.
func TestKustomizeBuild(t *testing.T) {
	kubectl := requireTool(t, "kubectl", "kubectl (with its built-in kustomize) is needed to render deploy/kubernetes")
	out := run(t, k8sDir, kubectl, "kustomize", ".")
	docs := loadYAMLString(t, out)
	k := manifests(t)["kustomization.yaml"]
	want := str(k, "images", 0, "newName")
	if tag := str(k, "images", 0, "newTag"); tag != "" {
		want += ":" + tag
	}
	kinds := map[string]bool{}
	for _, d := range docs {
		kinds[str(d, "kind")] = true
		if get(d, "metadata", "labels", "app.kubernetes.io/part-of") != "ballet" {
			t.Errorf("rendered %s %s lacks the part-of label", str(d, "kind"), str(d, "metadata", "name"))
		}
		for _, c := range list(d, "spec", "template", "spec", "containers") {
			if img := str(c, "image"); img != want {
				t.Errorf("rendered %s runs image %q, want %q", str(d, "kind"), img, want)
			}
		}
	}
	if len(docs) != len(k8sKinds)-1 {
		t.Errorf("rendered %d objects, want %d", len(docs), len(k8sKinds)-1)
	}
	for _, kind := range []string{"Deployment", "Job", "Service", "PodDisruptionBudget", "ServiceMonitor", "ConfigMap", "Secret"} {
		if !kinds[kind] {
			t.Errorf("rendered output has no %s", kind)
		}
	}
}
