// Package test holds repository-level tests. template_test.go checks the SAM
// template (template.yaml) against the code it deploys, template_ops_test.go
// its operational settings (retention, recovery, logs, alarm, build flags).
// bootstrap_test.go is built only with -tags samcheck: make sam-check runs it
// after sam build to check the built bootstraps. fuzz_docs_test.go holds
// docs/development.md's list of fuzz targets to the code. The end-to-end
// tests are in the e2e subpackage.
package test
