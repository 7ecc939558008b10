"""The PlusWorkflow example-tool, server side: answers "<exampleParam> answered"."""


def example_tool(exampleParam: str) -> str:
    if not exampleParam.strip():
        from gateway import ToolError

        raise ToolError("Parameter exampleParam is required.")
    return f"{exampleParam} answered"
