# Computes invalid-per-event.txt and invalid-whole.txt: the examples that an
# independent draft-07 validator (Python jsonschema, Draft7Validator,
# format not asserted: its default) refuses, against the event's own
# definition (per-event) and against the whole schema's top-level oneOf
# (whole). One line per example: "<event type> <index in its examples>".
# Run from this folder: python3 expected.py (the whole-schema pass takes
# minutes).
import json
import sys

import jsonschema

examples = json.load(open("webhooks-examples/api.github.com/index.json"))
schema = json.load(open("webhooks-schemas/schema.json"))


def definition(event):
    d = schema["definitions"]
    return event + "_event" if event + "_event" in d else event + "$event"


def invalid(validator_for):
    out = []
    for e in examples:
        v = validator_for(e["name"])
        for i, body in enumerate(e["examples"]):
            if not v.is_valid(body):
                out.append(f"{e['name']} {i}\n")
    return out


per = {}
for e in examples:
    s = dict(schema)
    s.pop("oneOf")
    s["$ref"] = "#/definitions/" + definition(e["name"])
    per[e["name"]] = jsonschema.Draft7Validator(s)
open("invalid-per-event.txt", "w").writelines(invalid(per.__getitem__))
if "--per-event-only" not in sys.argv:
    whole = jsonschema.Draft7Validator(schema)
    open("invalid-whole.txt", "w").writelines(invalid(lambda _: whole))
