// Package pgtest gives tests a throwaway Postgres database.
//
// URL creates a fresh database (from the server named by BALLET_TEST_DATABASE_URL, default
// postgres://postgres@127.0.0.1:5432/test?sslmode=disable) and drops it when the test ends;
// Pool also applies the migrations and closes the pool at the end. Without a reachable server
// the test is skipped, except with CI=true, where it fails.
package pgtest
