"""The use cases: reconcile a queue, handle a batch of stream, requeue, alert or history
records, check share tags for drift, publish share usage.

Each talks to the outside through the ports (`quota_controller.ports`) it is given and leaves
the decisions to the domain; the adapters implement the ports and composition wires them.
"""
