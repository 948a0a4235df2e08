from chamvi import App, ChamviClient, RunStatus, define_agent, tool
from chamvi.providers import ModelRegistry, ScriptedModel, call, reply


@tool
async def add(a: int, b: int) -> int:
    """Adds two numbers."""
    return a + b


async def test_a_run_calls_its_tool_and_completes(chamvi: ChamviClient, running_worker) -> None:
    models = ModelRegistry()
    models.register("scripted/adder", ScriptedModel([call("add", a=2, b=3), reply("5")]))
    app = App(
        agents=[define_agent(name="adder", model="scripted/adder", instructions="Add.", tools=[add])],
        models=models,
    )
    async with running_worker(app):
        dispatched = await chamvi.dispatch("adder", {"q": "2+3"})
        run = await chamvi.wait(dispatched.run_id)
    assert run.status == RunStatus.COMPLETED, run.error
    assert run.output == "5"
    assert [s.kind for s in run.steps] == ["llm", "tool", "llm"]
    assert run.steps[1].output == 5
