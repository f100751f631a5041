"""Translate a SAM template to CloudFormation offline, as CloudFormation's
AWS::Serverless transform would, and print the result as JSON.

Usage: python sam_translate.py template.yaml

Runs the SAM translator (the samtranslator package that the AWS SAM CLI ships)
with no AWS call: a fixed region (us-east-1), no managed policy names to look up
(the template names none), and each function's local CodeUri replaced by an S3
location, as `sam package` would upload it.
"""

import json
import sys

import boto3
from samtranslator.parser.parser import Parser
from samtranslator.translator.translator import Translator
from samtranslator.yaml_helper import yaml_parse


def main(path):
    with open(path, encoding="utf-8") as f:
        template = yaml_parse(f.read())
    for name, res in template.get("Resources", {}).items():
        props = res.get("Properties") or {}
        if res.get("Type") == "AWS::Serverless::Function" and isinstance(props.get("CodeUri"), str):
            props["CodeUri"] = "s3://sam-translate/" + name
    session = boto3.session.Session(region_name="us-east-1")
    translator = Translator({}, Parser(), boto_session=session)
    out = translator.translate(template, parameter_values={}, get_managed_policy_map=lambda: {})
    json.dump(out, sys.stdout, indent=1, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1])
