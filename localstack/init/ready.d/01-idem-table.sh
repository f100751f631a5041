#!/bin/bash
# Creates idem's idempotency table in LocalStack when it is ready (an init hook in
# /etc/localstack/init/ready.d). Same layout as ddbstore's defaults and the SAM template:
# on-demand, string partition key "pk", no sort key, TTL enabled on "expires_at" (epoch
# seconds). Idempotent: an existing table is left as it is.
set -euo pipefail

table="${IDEM_TABLE:-idem}"

if awslocal dynamodb describe-table --table-name "$table" >/dev/null 2>&1; then
	echo "idem: table $table exists"
else
	awslocal dynamodb create-table \
		--table-name "$table" \
		--billing-mode PAY_PER_REQUEST \
		--attribute-definitions AttributeName=pk,AttributeType=S \
		--key-schema AttributeName=pk,KeyType=HASH
	awslocal dynamodb wait table-exists --table-name "$table"
	echo "idem: created table $table"
fi

status="$(awslocal dynamodb describe-time-to-live --table-name "$table" \
	--query 'TimeToLiveDescription.TimeToLiveStatus' --output text)"
if [ "$status" != "ENABLED" ] && [ "$status" != "ENABLING" ]; then
	awslocal dynamodb update-time-to-live --table-name "$table" \
		--time-to-live-specification Enabled=true,AttributeName=expires_at
fi
echo "idem: TTL on $table: $(awslocal dynamodb describe-time-to-live --table-name "$table" \
	--query 'TimeToLiveDescription.[TimeToLiveStatus,AttributeName]' --output text)"
