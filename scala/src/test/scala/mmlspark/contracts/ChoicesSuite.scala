package mmlspark.contracts

import mmlspark.onnx.{HasDeviceType, ONNXModel}
import mmlspark.opencv.{ColorFormat, ImageTransformer}
import org.opencv.imgproc.Imgproc
import org.scalatest.funsuite.AnyFunSuite

/** Enumerated params read any case and the spellings SynapseML and ONNX Runtime use. */
class ChoicesSuite extends AnyFunSuite {

  test("a choice resolves in any case and through its aliases; others are refused by name") {
    val levels = ONNXModel.OptimizationLevels
    assert(
      Seq("all", "ALL", "ALL_OPT", "ORT_ENABLE_ALL", " all ").map(levels(_)).toSet == Set("all")
    )
    assert(levels("NO_OPT") == "none" && levels("basic_opt") == "basic")
    val error = intercept[IllegalArgumentException](levels("most"))
    assert(error.getMessage.contains("'most' is not one of 'none', 'basic', 'extended', 'all'"))
    assert(levels.resolve(null).isEmpty)
  }

  test("stage params take the spellings and the stage reads ours") {
    val model = new ONNXModel().setDeviceType("CPU").setOptimizationLevel("EXTENDED_OPT")
    assert(model.getDeviceType == "CPU") // kept as given, so it saves and loads unchanged
    assert(HasDeviceType.DeviceTypes(model.getDeviceType) == "cpu")
    assert(HasDeviceType.DeviceTypes("GPU") == "cuda")
    assert(ONNXModel.OptimizationLevels(model.getOptimizationLevel) == "extended")
    assert(
      new ONNXModel().setCudnnConvAlgoSearch("heuristic").getCudnnConvAlgoSearch == "heuristic"
    )
    new ImageTransformer().setTensorChannelOrder("bgr")
    intercept[IllegalArgumentException](new ImageTransformer().setTensorChannelOrder("RBG"))
  }

  test("colorFormat takes names in any case and OpenCV's COLOR_* codes from BGR(A)") {
    val targets = ColorFormat.targets
    assert(targets("gray") == "GRAY")
    assert(targets(Imgproc.COLOR_BGR2GRAY.toString) == "GRAY")
    assert(targets(Imgproc.COLOR_BGR2RGB.toString) == "RGB")
    assert(targets(Imgproc.COLOR_BGRA2BGR.toString) == "BGR")
    val hsv =
      intercept[IllegalArgumentException](ColorFormat(Imgproc.COLOR_BGR2HSV.toString).validate())
    assert(hsv.getMessage.contains("format must be one of 'RGB', 'BGR', 'GRAY'"))
    val tf = new ImageTransformer().colorFormat(Imgproc.COLOR_BGR2GRAY)
    assert(tf.getOps == Seq(ColorFormat("6")))
  }

  test("normalize makes a tensor unless toTensor was set, as SynapseML's does") {
    assert(new ImageTransformer().normalize(Array(0.5), Array(0.5), 1.0).getToTensor)
    assert(
      !new ImageTransformer().setToTensor(false).normalize(Array(0.5), Array(0.5), 1.0).getToTensor
    )
  }
}
