from sigconv.cli import run

run()
