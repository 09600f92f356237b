package getonly

import "net/http"

// Allow reports whether r is a GET or a HEAD; for any other method it answers 405 with
// Allow: GET, HEAD and reports false.
func Allow(w http.ResponseWriter, r *http.Request) bool {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return true
	}
	w.Header().Set("Allow", "GET, HEAD")
	http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
	return false
}
