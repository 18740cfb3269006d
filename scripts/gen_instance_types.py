"""Print quota_controller/domain/instance_types.py from the installed botocore SageMaker model.

Run with `make instance-types` after raising botocore; tests fail while the file and the
installed model disagree, so the list never drifts silently.
"""

import botocore
import botocore.session


def main() -> None:
    model = botocore.session.get_session().get_service_model("sagemaker")
    values = sorted(model.shape_for("TrainingInstanceType").enum)
    print('"""SageMaker Training instance types, generated from the botocore SageMaker model.')
    print()
    print("Source: shape TrainingInstanceType of botocore", botocore.__version__ + ".")
    print('Do not edit: run `make instance-types`."""')
    print()
    print(f'BOTOCORE_VERSION = "{botocore.__version__}"')
    print()
    print("TRAINING_INSTANCE_TYPES: frozenset[str] = frozenset(")
    print("    {")
    for v in values:
        print(f'        "{v}",')
    print("    }")
    print(")")


if __name__ == "__main__":
    main()
