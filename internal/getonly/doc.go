// Package getonly is the method check of the handlers that only serve documents (the issuer's
// discovery and keys, the web client's files): GET and HEAD pass, any other method is a 405.
package getonly
