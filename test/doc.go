// Package test holds repository-level tests: template_test.go checks the
// SAM template (template.yaml) against the code it deploys; the
// end-to-end tests are in the e2e subpackage.
package test
