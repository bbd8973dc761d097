package mmlspark.stages

import mmlspark.contracts.{EstimatorSuite, StageChecks, TestObject}

class TimerSuite extends EstimatorSuite[Timer, TimerModel] {

  override def testObjects: Seq[TestObject[Timer]] = Seq(
    TestObject(
      new Timer().setStage(new SelectColumns().setCols(Array("id", "score"))),
      Fixtures.people,
      out => StageChecks.assertSameRows(Fixtures.people.select("id", "score"), out)
    ),
    TestObject(
      new Timer().setStage(new ClassBalancer().setInputCol("key")).setMaterialize(false),
      Fixtures.people,
      out =>
        StageChecks.assertSameRows(
          new ClassBalancer().setInputCol("key").fit(Fixtures.people).transform(Fixtures.people),
          out
        )
    )
  )

  test("the model records fit and transform times and wraps the fitted inner model") {
    val model = new Timer().setStage(new ClassBalancer().setInputCol("key")).fit(Fixtures.people)
    assert(model.getStage.isInstanceOf[ClassBalancerModel])
    assert(model.getFitMillis >= 0)
    assert(model.lastTransformMillis == -1L)
    model.transform(Fixtures.people)
    assert(model.lastTransformMillis >= 0)
  }

  test("a timer without a stage fails before any job") {
    val error = intercept[IllegalArgumentException](new Timer().fit(Fixtures.people))
    assert(error.getMessage.contains("'stage' must be set"))
  }
}
