// Package test holds repository-level tests. template_test.go checks the SAM
// template (template.yaml) against the code it deploys and the permissions
// docs/deployment.md lists, template_ops_test.go its operational settings
// (retention, recovery, logs, build flags), template_alarms_test.go its
// alarms, and template_sam_test.go the template as SAM's transform makes it
// (the SAM translator, run offline): least privilege, alarms, dashboard,
// throttling, access logs. bootstrap_test.go is built only with -tags
// samcheck: make sam-check runs it after sam build to check the built
// bootstraps. fuzz_docs_test.go holds docs/development.md's list of fuzz
// targets to the code, cost_docs_test.go docs/cost.md's dollar figures to its
// units and prices, testingdoc_test.go compiles and runs docs/testing.md's
// code. The end-to-end tests are in the e2e subpackage.
package test
