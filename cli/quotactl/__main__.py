from quotactl import run

run()
